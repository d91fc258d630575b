package app

import (
	"fmt"
	"math"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/signalbox/signalbox/internal/platform/obs"
)

// Alarm kinds on the director's service KPIs, as the reference director
// alarms on its KPIs.
const (
	alarmXDRFailureRatio = "xdr_failure_ratio"
	alarmXDRLatency      = "xdr_latency"
)

// kpiWatch is what the last KPI check read of the xDR counters, to take
// the differences of the window since.
type kpiWatch struct {
	total, failed map[string]float64             // by service
	buckets       map[string]map[float64]float64 // by service: upper bound -> cumulative count
	raised        map[string]bool                // alarm kind + "/" + source
}

func newKPIWatch() *kpiWatch {
	return &kpiWatch{total: map[string]float64{}, failed: map[string]float64{},
		buckets: map[string]map[float64]float64{}, raised: map[string]bool{}}
}

// checkKPIs raises xdr_failure_ratio for each service whose transactions
// failed (4xx, 5xx, no response) above -alarm-xdr-failure-ratio over the
// window (with at least 20 of them), and xdr_latency for each whose p99
// passed -alarm-xdr-latency; it clears them once the window is healthy.
// The counters are the xdr feeds' (summed over feeds and NF types).
func (s *Server) checkKPIs(w *kpiWatch) {
	fams, err := s.reg.Gather()
	if err != nil {
		return
	}
	total, failed := map[string]float64{}, map[string]float64{}
	buckets := map[string]map[float64]float64{}
	for _, f := range fams {
		switch f.GetName() {
		case "signalbox_xdr_transactions_total":
			for _, m := range f.GetMetric() {
				svc, class := labelOf(m, "service"), labelOf(m, "status_class")
				v := m.GetCounter().GetValue()
				total[svc] += v
				if class == "4xx" || class == "5xx" || class == "timeout" {
					failed[svc] += v
				}
			}
		case "signalbox_xdr_latency_seconds":
			for _, m := range f.GetMetric() {
				svc := labelOf(m, "service")
				if buckets[svc] == nil {
					buckets[svc] = map[float64]float64{}
				}
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					buckets[svc][b.GetUpperBound()] += float64(b.GetCumulativeCount())
				}
				buckets[svc][math.Inf(1)] += float64(h.GetSampleCount())
			}
		}
	}
	active := map[string]bool{}
	window := s.cfg.AlarmKPIWindow
	for svc, t := range total {
		n, bad := t-w.total[svc], failed[svc]-w.failed[svc]
		if n >= 20 && bad/n > s.cfg.AlarmXDRFailureRatio {
			src := "service/" + svc
			s.alarms.Raise(alarmXDRFailureRatio, src, obs.Major, fmt.Sprintf("%s: %.0f of %.0f transactions failed in the last %s (%.1f%%, threshold %.1f%%)",
				svc, bad, n, window, 100*bad/n, 100*s.cfg.AlarmXDRFailureRatio))
			active[alarmXDRFailureRatio+"/"+src] = true
		}
	}
	for svc, bs := range buckets {
		if p99 := windowQuantile(w.buckets[svc], bs, 0.99); p99 > s.cfg.AlarmXDRLatency.Seconds() {
			src := "service/" + svc
			s.alarms.Raise(alarmXDRLatency, src, obs.Minor, fmt.Sprintf("%s: p99 transaction latency over %s in the last %s (threshold %s)",
				svc, time.Duration(p99*float64(time.Second)).Round(time.Millisecond), window, s.cfg.AlarmXDRLatency))
			active[alarmXDRLatency+"/"+src] = true
		}
	}
	for k := range w.raised {
		if !active[k] {
			kind, src := splitAlarmKey(k)
			s.alarms.Clear(kind, src)
		}
	}
	w.raised, w.total, w.failed, w.buckets = active, total, failed, buckets
}

func splitAlarmKey(k string) (kind, src string) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return k, ""
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// windowQuantile is the q quantile of the observations between two reads
// of a cumulative histogram (its +Inf bucket holding the count): the upper
// bound of the bucket it falls in, or 0 without observations.
func windowQuantile(before, after map[float64]float64, q float64) float64 {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	total := 0.0
	if len(bounds) > 0 {
		total = after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	}
	if total <= 0 {
		return 0
	}
	rank := q * total
	for _, b := range bounds {
		if after[b]-before[b] >= rank {
			return b
		}
	}
	return bounds[len(bounds)-1]
}
