// Package metricdoc holds the HELP text of every family the pooler's
// /metrics writes, and writes the exposition with them filled in.
package metricdoc

import (
	"bytes"
	"io"
)

// /metrics' HELP texts, and the runtime collector's families renamed to
// Prometheus' conventions. VictoriaMetrics/metrics writes "# HELP name"
// with no text for every family it writes (it has no place for one), and
// names a few runtime families against Prometheus' rules (promtool check
// metrics flags them), so the pooler writes into a buffer and Write fills
// in the text and fixes those names on the way out.

// Help is the HELP text of every family /metrics writes. A family
// missing here gets NoHelp, which the pooler's TestMetricsNaming catches.
var Help = map[string]string{
	// Pools: SHOW POOLS' columns, one series per pool (metrics.go).
	"pgturnstile_pool_clients_active":         "Clients of the pool not waiting for a server: linked, idle or parked (SHOW POOLS cl_active).",
	"pgturnstile_pool_clients_waiting":        "Clients queued for a server of the pool (SHOW POOLS cl_waiting).",
	"pgturnstile_pool_servers_active":         "Server connections of the pool linked to a client or in use by the pooler (SHOW POOLS sv_active).",
	"pgturnstile_pool_servers_idle":           "Server connections of the pool idle and ready for a client (SHOW POOLS sv_idle).",
	"pgturnstile_pool_servers_login":          "Server connections of the pool being opened and logged in (SHOW POOLS sv_login).",
	"pgturnstile_pool_servers_being_canceled": "Server connections released while a cancel request for them was still on its way to Postgres (SHOW POOLS sv_being_canceled).",
	"pgturnstile_pool_size":                   "The pool's pool_size (SHOW POOLS pool_size).",
	"pgturnstile_pool_maxwait_seconds":        "How long the pool's longest-waiting client has waited for a server (SHOW POOLS maxwait, maxwait_us).",

	// Pools: SHOW STATS' totals, one series per pool (metrics.go).
	"pgturnstile_server_assignments_total":       "Times a server was assigned to a client (SHOW STATS total_server_assignment_count).",
	"pgturnstile_transactions_total":             "Transactions pooled (SHOW STATS total_xact_count).",
	"pgturnstile_queries_total":                  "Queries pooled (SHOW STATS total_query_count).",
	"pgturnstile_received_bytes_total":           "Bytes received from clients (SHOW STATS total_received).",
	"pgturnstile_sent_bytes_total":               "Bytes sent to clients (SHOW STATS total_sent).",
	"pgturnstile_transaction_time_seconds_total": "Time spent in transactions linked to a server (SHOW STATS total_xact_time, there in microseconds).",
	"pgturnstile_query_time_seconds_total":       "Time spent in queries on a server (SHOW STATS total_query_time, there in microseconds).",
	"pgturnstile_wait_time_seconds_total":        "Time clients waited for a server (SHOW STATS total_wait_time, there in microseconds).",
	"pgturnstile_client_parses_total":            "Prepared statements clients parsed (SHOW STATS total_client_parse_count).",
	"pgturnstile_server_parses_total":            "Prepared statements parsed on servers (SHOW STATS total_server_parse_count).",
	"pgturnstile_binds_total":                    "Prepared statements bound (SHOW STATS total_bind_count).",
	"pgturnstile_client_logins_total":            "Client logins (SHOW STATS total_client_login_count).",

	// Pools: histograms and event counters, created with the pool.
	"pgturnstile_query_duration_seconds":            "Query durations on a server, from the query to its ReadyForQuery.",
	"pgturnstile_wait_duration_seconds":             "How long clients waited for a server, per server assignment.",
	"pgturnstile_server_connect_wait_seconds_total": "Time the pool's growth waited for a server_connect_rate token.",
	"pgturnstile_server_connects_total":             "Server connections logged in.",
	"pgturnstile_server_connect_attempts_total":     "Server connections started (server_connect_rate takes a token for each).",
	"pgturnstile_server_login_failures_total":       "Server connections whose connect or login failed.",
	"pgturnstile_server_close_deferred_total":       "Server closes put off by server_close_rate.",
	"pgturnstile_server_closes_total":               "Server connections closed, by reason (the log's \"closing because\" text).",
	"pgturnstile_server_drain_total":                "Servers brought back after their client left while linked, by outcome (drained: no cancel needed; cancelled; closed).",
	"pgturnstile_server_drain_rollbacks_total":      "Transactions rolled back on a server whose client left in the transaction.",
	"pgturnstile_server_drain_cancels_total":        "Cancel requests for the query of a server whose client left, by result (sent, no_slot, failed).",

	// Admission (admission_file): the gates as SHOW ADMISSION prints them,
	// the decisions and their waits.
	"pgturnstile_admission_capacity":               "Slots the pool's admission gate hands out.",
	"pgturnstile_admission_in_use":                 "Admission slots of the pool held now.",
	"pgturnstile_admission_debt":                   "A priority tier's debt: the slots higher tiers claim and do not hold yet.",
	"pgturnstile_admission_demand":                 "A priority tier's demand: its smoothed count of slots wanted.",
	"pgturnstile_admission_allowed":                "Slots a priority tier may hold now.",
	"pgturnstile_admission_tier_in_use":            "Admission slots a priority tier holds now.",
	"pgturnstile_admission_lifo":                   "1 while a priority tier's queue is served newest first (overload), 0 while oldest first.",
	"pgturnstile_admission_waiting":                "Clients of a priority tier waiting for an admission slot.",
	"pgturnstile_admission_node_in_use":            "Admission slots a fair-share category holds now.",
	"pgturnstile_admission_node_waiting":           "Clients of a fair-share category waiting for an admission slot.",
	"pgturnstile_admission_busy_ratio":             "Fraction of the gate's capacity held since the gate started.",
	"pgturnstile_admission_in_use_seconds_total":   "Slot-seconds held at the pool's admission gate since it started (a policy reload restarts it).",
	"pgturnstile_admission_capacity_seconds_total": "Slot-seconds of capacity of the pool's admission gate since it started (a policy reload restarts it).",
	"pgturnstile_admission_decisions_total":        "Admission decisions, by priority, fair-share category and outcome.",
	"pgturnstile_admission_wait_seconds":           "How long admission decisions took, by priority.",
	"pgturnstile_route_decisions_total":            "Statements of sharded clusters' clients the router decided, by cluster, colocation and source of the decision (literal, param, hint, option, target, default, scatter, refused).",
	"pgturnstile_route_refusals_total":             "Statements the router refused (SQLSTATE 0A000), by cluster, colocation and reason.",
	"pgturnstile_shard_map_generation":             "The configuration generation whose shard map (shard_file) is in force; it changes at every RELOAD that loads one.",
	"pgturnstile_shard_source_connected":           "1 while the shard map's source (shard_source = etcd) answers, 0 while it is lost (the map in force stays).",
	"pgturnstile_shard_map_revision":               "The etcd mod revision of the shard map in force (shard_source = etcd); 0 before the first.",
	"pgturnstile_shard_map_latest_revision":        "The newest revision of the shard map this instance has seen in etcd, in force or refused.",
	"pgturnstile_shard_map_rejected_total":         "Shard maps from etcd refused (a check failed, or the key was deleted); the map in force stayed.",
	"pgturnstile_shard_instances":                  "pgturnstile instances with a record under the etcd prefix (SHOW SHARD_INSTANCES), as this instance last saw them.",
	"pgturnstile_shard_instances_converged":        "Of pgturnstile_shard_instances, those that serve the newest map revision this instance has seen.",
	"pgturnstile_admission_option_notices_total":   "NOTICEs sent at login for an admission startup option ignored or changed (unknown key, priority that names no tier, priority clamped to max_priority).",

	// The process.
	"pgturnstile_clients":                       "Client connections open, logged in or not.",
	"pgturnstile_clients_parked":                "Idle clients parked as bare descriptors, with no goroutine or buffers.",
	"pgturnstile_event_loop_transactions_total": "Transactions run whole on the event loop (request read, server linked, reply relayed and server released by a poller's goroutine, no goroutine woken).",
	"pgturnstile_event_loop_moves_total":        "Clients on the event loop moved to another poller between requests: to the first poller with room, or away from a saturated one.",
	"pgturnstile_event_loop_poller_load":        "Each poller's share of time spent handing out events (its loop's work), 0 to 1, averaged over about 80 ms; placement fills the first pollers up to 0.6 and spills from one above 0.9.",
	"pgturnstile_held_message_bytes":            "Bytes of client messages held whole in memory (held_message_budget).",
	"pgturnstile_prepared_statement_bytes":      "Bytes of prepared-statement text held (prepared_statement_budget).",
	"go_gc_heap_live_bytes":                     "Heap the last garbage collection found live (runtime/metrics /gc/heap/live:bytes).",

	// The Go runtime (VictoriaMetrics/metrics' collector).
	"go_sched_latencies_seconds":          "Time goroutines spent runnable before running (runtime/metrics /sched/latencies:seconds).",
	"go_mutex_wait_seconds_total":         "Time goroutines spent blocked on a sync.Mutex or sync.RWMutex (runtime/metrics /sync/mutex/wait/total:seconds).",
	"go_gc_mark_assist_cpu_seconds_total": "CPU time goroutines spent assisting the garbage collector (runtime/metrics /cpu/classes/gc/mark/assist:cpu-seconds).",
	"go_gc_cpu_seconds_total":             "CPU time spent on garbage collection (runtime/metrics /cpu/classes/gc/total:cpu-seconds).",
	"go_gc_pauses_seconds":                "Stop-the-world pauses of the garbage collector (runtime/metrics /gc/pauses:seconds).",
	"go_scavenge_cpu_seconds_total":       "CPU time spent returning memory to the OS (runtime/metrics /cpu/classes/scavenge/total:cpu-seconds).",
	"go_memlimit_bytes":                   "The Go runtime's memory limit (GOMEMLIMIT).",
	"go_memstats_alloc_bytes":             "Bytes of heap objects allocated and not yet freed (runtime.MemStats.Alloc).",
	"go_memstats_alloc_bytes_total":       "Bytes of heap objects allocated since start (runtime.MemStats.TotalAlloc).",
	"go_memstats_buck_hash_sys_bytes":     "Bytes used by the profiling bucket hash table (runtime.MemStats.BuckHashSys).",
	"go_memstats_frees_total":             "Heap objects freed since start (runtime.MemStats.Frees).",
	"go_memstats_gc_cpu_fraction":         "Fraction of CPU time used by the garbage collector since start (runtime.MemStats.GCCPUFraction).",
	"go_memstats_gc_sys_bytes":            "Bytes used for garbage collection metadata (runtime.MemStats.GCSys).",
	"go_memstats_heap_alloc_bytes":        "Bytes of heap objects allocated and not yet freed (runtime.MemStats.HeapAlloc).",
	"go_memstats_heap_idle_bytes":         "Bytes in idle heap spans (runtime.MemStats.HeapIdle).",
	"go_memstats_heap_inuse_bytes":        "Bytes in in-use heap spans (runtime.MemStats.HeapInuse).",
	"go_memstats_heap_objects":            "Heap objects allocated and not yet freed (runtime.MemStats.HeapObjects).",
	"go_memstats_heap_released_bytes":     "Bytes of heap returned to the OS (runtime.MemStats.HeapReleased).",
	"go_memstats_heap_sys_bytes":          "Bytes of heap memory obtained from the OS (runtime.MemStats.HeapSys).",
	"go_memstats_last_gc_time_seconds":    "When the last garbage collection finished, in seconds since the Unix epoch (runtime.MemStats.LastGC).",
	"go_memstats_lookups_total":           "Pointer lookups by the runtime since start (runtime.MemStats.Lookups).",
	"go_memstats_mallocs_total":           "Heap objects allocated since start (runtime.MemStats.Mallocs).",
	"go_memstats_mcache_inuse_bytes":      "Bytes in mcache structures in use (runtime.MemStats.MCacheInuse).",
	"go_memstats_mcache_sys_bytes":        "Bytes of memory obtained from the OS for mcache structures (runtime.MemStats.MCacheSys).",
	"go_memstats_mspan_inuse_bytes":       "Bytes in mspan structures in use (runtime.MemStats.MSpanInuse).",
	"go_memstats_mspan_sys_bytes":         "Bytes of memory obtained from the OS for mspan structures (runtime.MemStats.MSpanSys).",
	"go_memstats_next_gc_bytes":           "Heap size the next garbage collection aims at (runtime.MemStats.NextGC).",
	"go_memstats_other_sys_bytes":         "Bytes of other runtime allocations (runtime.MemStats.OtherSys).",
	"go_memstats_stack_inuse_bytes":       "Bytes in stack spans (runtime.MemStats.StackInuse).",
	"go_memstats_stack_sys_bytes":         "Bytes of stack memory obtained from the OS (runtime.MemStats.StackSys).",
	"go_memstats_sys_bytes":               "Bytes of memory obtained from the OS (runtime.MemStats.Sys).",
	"go_cgo_calls_total":                  "cgo calls made since start (runtime.NumCgoCall).",
	"go_cpus":                             "Logical CPUs usable by the process (runtime.NumCPU).",
	"go_gc_duration_seconds":              "Stop-the-world pause durations of the garbage collector (runtime.MemStats.PauseNs).",
	"go_gc_forced_total":                  "Garbage collections forced by the application (runtime.MemStats.NumForcedGC).",
	"go_gomaxprocs":                       "GOMAXPROCS: the CPUs that can run Go code at once.",
	"go_goroutines":                       "Goroutines that exist now.",
	"go_threads":                          "OS threads created by the Go runtime.",
	"go_info":                             "The Go version the binary was built with, in the version label; always 1.",
	"go_info_ext":                         "The Go compiler, architecture, OS and GOROOT the binary was built with, in labels; always 1.",

	// The process, from /proc (VictoriaMetrics/metrics' collector).
	"process_cpu_seconds_system_total":              "CPU time spent in the kernel for the process.",
	"process_cpu_seconds_total":                     "CPU time spent by the process, user and kernel.",
	"process_cpu_seconds_user_total":                "CPU time spent in user space by the process.",
	"process_major_pagefaults_total":                "Page faults of the process that needed a disk read.",
	"process_minor_pagefaults_total":                "Page faults of the process served without a disk read.",
	"process_num_threads":                           "OS threads of the process.",
	"process_resident_memory_bytes":                 "Resident memory of the process.",
	"process_resident_memory_peak_bytes":            "Largest resident memory of the process so far.",
	"process_resident_memory_anon_bytes":            "Resident anonymous memory of the process (heap, stacks).",
	"process_resident_memory_file_bytes":            "Resident file-backed memory of the process (the binary, mapped files).",
	"process_resident_memory_shared_bytes":          "Resident shared memory of the process.",
	"process_start_time_seconds":                    "When the process started, in seconds since the Unix epoch.",
	"process_virtual_memory_bytes":                  "Virtual memory size of the process.",
	"process_virtual_memory_peak_bytes":             "Largest virtual memory size of the process so far.",
	"process_io_read_bytes_total":                   "Bytes the process read through read-like system calls.",
	"process_io_written_bytes_total":                "Bytes the process wrote through write-like system calls.",
	"process_io_read_syscalls_total":                "Read-like system calls of the process.",
	"process_io_write_syscalls_total":               "Write-like system calls of the process.",
	"process_io_storage_read_bytes_total":           "Bytes the process caused to be read from storage.",
	"process_io_storage_written_bytes_total":        "Bytes the process caused to be written to storage.",
	"process_pressure_cpu_waiting_seconds_total":    "Time some of the process's cgroup waited for CPU (pressure stall information).",
	"process_pressure_cpu_stalled_seconds_total":    "Time all of the process's cgroup was stalled on CPU (pressure stall information).",
	"process_pressure_io_waiting_seconds_total":     "Time some of the process's cgroup waited for I/O (pressure stall information).",
	"process_pressure_io_stalled_seconds_total":     "Time all of the process's cgroup was stalled on I/O (pressure stall information).",
	"process_pressure_memory_waiting_seconds_total": "Time some of the process's cgroup waited for memory (pressure stall information).",
	"process_pressure_memory_stalled_seconds_total": "Time all of the process's cgroup was stalled on memory (pressure stall information).",
	"process_cgroup_cpu_throttled_seconds_total":    "Time the process's cgroup was throttled by its CPU limit.",
}

// NoHelp is the HELP text of a family Help does not describe.
const NoHelp = "Undocumented."

// RuntimeFamilyFixes renames the families the runtime collector names
// against Prometheus' conventions (counters end in _total; _count is for a
// histogram's or summary's sample count) and retypes the counters it
// writes as gauges. The old names are in the README's list of renames.
var RuntimeFamilyFixes = map[string]struct{ Name, Type string }{
	"go_cgo_calls_count":                     {Name: "go_cgo_calls_total"},
	"go_gc_forced_count":                     {Name: "go_gc_forced_total"},
	"go_cpu_count":                           {Name: "go_cpus"},
	"process_io_read_bytes_total":            {Type: "counter"},
	"process_io_written_bytes_total":         {Type: "counter"},
	"process_io_read_syscalls_total":         {Type: "counter"},
	"process_io_write_syscalls_total":        {Type: "counter"},
	"process_io_storage_read_bytes_total":    {Type: "counter"},
	"process_io_storage_written_bytes_total": {Type: "counter"},
}

var (
	helpPrefix = []byte("# HELP ")
	typePrefix = []byte("# TYPE ")
)

// Write copies the exposition text to w, filling in each family's
// HELP and applying RuntimeFamilyFixes.
func Write(w io.Writer, text []byte) {
	out := make([]byte, 0, len(text)+len(text)/4)
	for len(text) > 0 {
		var line []byte
		line, text, _ = bytes.Cut(text, []byte{'\n'})
		switch {
		case bytes.HasPrefix(line, helpPrefix):
			family, _, _ := bytes.Cut(line[len(helpPrefix):], []byte{' '})
			name := fixedFamily(family)
			help, ok := Help[name]
			if !ok {
				help = NoHelp
			}
			out = append(append(append(append(out, helpPrefix...), name...), ' '), help...)
		case bytes.HasPrefix(line, typePrefix):
			family, typ, _ := bytes.Cut(line[len(typePrefix):], []byte{' '})
			if fix, ok := RuntimeFamilyFixes[string(family)]; ok && fix.Type != "" {
				typ = []byte(fix.Type)
			}
			out = append(append(append(append(out, typePrefix...), fixedFamily(family)...), ' '), typ...)
		default:
			// A sample of a renamed family: they have no labels.
			name, value, ok := bytes.Cut(line, []byte{' '})
			if fix, found := RuntimeFamilyFixes[string(name)]; ok && found && fix.Name != "" {
				out = append(append(append(out, fix.Name...), ' '), value...)
			} else {
				out = append(out, line...)
			}
		}
		out = append(out, '\n')
	}
	_, _ = w.Write(out)
}

// fixedFamily is family's name after RuntimeFamilyFixes.
func fixedFamily(family []byte) string {
	if fix, ok := RuntimeFamilyFixes[string(family)]; ok && fix.Name != "" {
		return fix.Name
	}
	return string(family)
}
