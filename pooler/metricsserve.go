package pooler

import (
	"net"
	"net/http"
)

// ServeMetrics serves /metrics (WriteMetrics) on ln, metrics_addr's
// listener, in a goroutine of its own. The service keeps ln for an online
// restart, which hands it over with the pooler's listeners (takeover.go):
// the new process cannot bind the port while this one holds it.
func (s *Service) ServeMetrics(ln net.Listener) {
	s.mu.Lock()
	s.metricsLn = ln
	s.mu.Unlock()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		s.WriteMetrics(w)
	})
	go http.Serve(ln, mux)
}

// metricsListenerNow is the metrics listener, nil if none.
func (s *Service) metricsListenerNow() net.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metricsLn
}

// closeMetricsListener stops serving /metrics here: an online restart
// took the listener.
func (s *Service) closeMetricsListener() {
	s.mu.Lock()
	ln := s.metricsLn
	s.metricsLn = nil
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}
