// Package obs holds signalbox's observability core: the application's own
// Prometheus registry, liveness and readiness.
package obs

import (
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry with the Go runtime and process collectors
// and a build-info gauge.
func NewRegistry(version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bi := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "signalbox_build_info",
		Help:        "Build information; always 1.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	bi.Set(1)
	reg.MustRegister(bi)
	return reg
}

// MetricsHandler serves reg in the Prometheus exposition format.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Health tracks readiness: the process is ready once every registered
// component has reported ready, and stays not-ready while any reports down.
type Health struct {
	mu    sync.Mutex
	comps map[string]string // component -> "" when ready, else why not
}

// NewHealth returns a Health with no components (not ready until one is added
// and all are up).
func NewHealth() *Health { return &Health{comps: map[string]string{}} }

// Pending registers a component as not ready yet.
func (h *Health) Pending(component, why string) {
	h.mu.Lock()
	h.comps[component] = why
	h.mu.Unlock()
}

// Ready marks a component ready.
func (h *Health) Ready(component string) {
	h.mu.Lock()
	h.comps[component] = ""
	h.mu.Unlock()
}

// Ready reports overall readiness and, when not ready, what is pending.
func (h *Health) State() (bool, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var pending []string
	for c, why := range h.comps {
		if why != "" {
			pending = append(pending, c+": "+why)
		}
	}
	sort.Strings(pending)
	return len(h.comps) > 0 && len(pending) == 0, pending
}

// LiveHandler answers /healthz: 200 while the process serves HTTP.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
}

// ReadyHandler answers /readyz: 200 only once every component is up, else
// 503 listing what is pending.
func (h *Health) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ok, pending := h.State()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			if len(pending) == 0 {
				pending = []string{"starting"}
			}
			w.Write([]byte("not ready\n" + strings.Join(pending, "\n") + "\n"))
			return
		}
		w.Write([]byte("ready\n"))
	})
}
