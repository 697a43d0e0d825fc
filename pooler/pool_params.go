package pooler

import (
	"github.com/pgturnstile/pgturnstile/internal/pgsetting"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The parameters a pool's clients log in with: the pool's welcome (its
// first server's), overridden by each client's startup packet, interned
// so that clients with the same parameters share one map.

func (p *serverPool) hasWelcome() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.welcome != nil
}

// welcomeParams returns the parameters of the pool's first server login,
// sent to every client at login. The map is never modified after it is set.
func (p *serverPool) welcomeParams() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.welcome
}

// loginParamSet is an interned parameter map and the ParameterStatus
// messages a client with it is welcomed with (wire.AppendParameterStatuses).
type loginParamSet struct {
	params map[string]string
	status []byte
}

// loginParams are a new client's tracked parameters: the pool's defaults,
// overridden by what the client's startup packet asked for. The map is
// shared with other clients that have the same parameters and must not be
// changed (client.setParamLocked copies it). With it come the welcome's
// ParameterStatus messages for the map where the pool knows its welcome
// (nil before): built once per set of startup parameters, not at each
// login.
func (p *serverPool) loginParams(startup map[string]string) (map[string]string, []byte) {
	// Most logins ask for what an earlier one asked for: their map is
	// found by the startup parameters alone, without building the merge
	// and its key again.
	skey := pgsetting.Key(startup)
	p.mu.Lock()
	if e, ok := p.byStartup[skey]; ok {
		p.mu.Unlock()
		return e.params, e.status
	}
	welcome := p.welcome
	p.mu.Unlock()
	out := map[string]string{}
	for canon := range p.svc.tracked {
		name := p.svc.tracked[canon]
		if v, ok := welcome[name]; ok {
			out[name] = v
		}
	}
	for k, v := range startup {
		out[k] = v
	}
	key := pgsetting.Key(out)
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.paramSets[key]
	if !ok {
		m = out
		if p.paramSets == nil {
			p.paramSets = map[string]map[string]string{}
		}
		if len(p.paramSets) < maxParamSets {
			p.paramSets[key] = out
		}
	}
	// The pool's welcome is set once, by its first server, and the
	// tracked names are fixed when the service starts: from then on the
	// same startup parameters always give the same map.
	if welcome == nil {
		return m, nil
	}
	status := wire.AppendParameterStatuses(nil, welcome, m)
	if len(p.byStartup) < maxParamSets {
		if p.byStartup == nil {
			p.byStartup = map[string]loginParamSet{}
		}
		p.byStartup[skey] = loginParamSet{params: m, status: status}
	}
	return m, status
}

// maxParamSets bounds a pool's interned parameter maps: clients that each
// send a different application_name get maps of their own.
const maxParamSets = 64
