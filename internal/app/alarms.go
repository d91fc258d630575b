package app

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/ratesync"
	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/platform/obs"
	"github.com/signalbox/signalbox/internal/platform/snmpnotify"
)

// Alarm kinds raised by the app's watcher.
const (
	alarmFeedDisconnected   = "feed_disconnected"
	alarmFeedLag            = "feed_lag"
	alarmFeedCopiesLost     = "feed_copies_lost"
	alarmFeedLatency        = "feed_latency"
	alarmCURRIErrors        = "curri_error_rate"
	alarmCURRILatency       = "curri_latency"
	alarmCURRIUnknownPolicy = "curri_unknown_policy"
	alarmCURRIKeepalive     = "curri_keepalive_missing"
	alarmStoreUnreachable   = "store_unreachable"
	alarmCallsStream        = "calls_stream_dropped"
	alarmReputation         = "reputation_unavailable"
	alarmWebhook            = "webhook_failing"
	alarmSitePeer           = "site_peer_unreachable"
	alarmSiteMirror         = "site_mirror_failing"
	alarmSitePositions      = "site_positions_pending"
)

// alarmKinds is every alarm kind signalbox raises: each has an alert rule
// in deploy/prometheus/signalbox.rules.yml (TestAlertRulesCoverAlarms).
var alarmKinds = []string{alarmFeedDisconnected, alarmFeedLag, alarmFeedCopiesLost, alarmFeedLatency,
	alarmCURRIErrors, alarmCURRILatency, alarmCURRIUnknownPolicy, alarmCURRIKeepalive, alarmStoreUnreachable,
	alarmCallsStream, alarmReputation, alarmWebhook, alarmXDRFailureRatio, alarmXDRLatency, ratesync.AlarmID, alarmKafkaOpen}

// newSNMPNotifier sends the alarms to -snmp-managers. The node is named
// by -node-name or the host name, which also make the default SNMPv3
// engine ID, so that it stays the same across restarts.
func newSNMPNotifier(cfg config.Serve, node string, reg prometheus.Registerer, log *slog.Logger) (*snmpnotify.Notifier, error) {
	var engine []byte
	if cfg.SNMPEngineID != "" {
		var err error
		if engine, err = snmpnotify.ParseEngineID(cfg.SNMPEngineID); err != nil {
			return nil, err
		}
	}
	// snmpEngineBoots grows at every start (kept in the data dir), so that
	// managers take a restarted node's notifications.
	var boots uint32
	if cfg.SNMPVersion == "3" {
		var err error
		if boots, err = snmpnotify.NextBoots(filepath.Join(cfg.DataDir, "snmp-engine-boots")); err != nil {
			return nil, err
		}
	}
	var managers []string
	for _, m := range strings.Split(cfg.SNMPManagers, ",") {
		if m = strings.TrimSpace(m); m != "" {
			managers = append(managers, m)
		}
	}
	n, err := snmpnotify.New(snmpnotify.Config{Managers: managers, Version: cfg.SNMPVersion,
		Community: cfg.SNMPCommunity, User: cfg.SNMPUser, AuthProtocol: cfg.SNMPAuthProtocol,
		AuthPassword: cfg.SNMPAuthPassword, PrivProtocol: cfg.SNMPPrivProtocol, PrivPassword: cfg.SNMPPrivPassword,
		EngineID: engine, Boots: boots, Node: node, Registerer: reg, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("alarms are sent as SNMP notifications", "managers", managers, "version", cfg.SNMPVersion, "node", node)
	return n, nil
}

// curriWatch accumulates, off the reply path and without locks on the common
// path, what the alarm watcher needs of CURRI traffic.
type curriWatch struct {
	total, failed atomic.Int64
	slowest       atomic.Int64 // ns, this interval

	mu        sync.Mutex
	lastHead  map[string]time.Time // policy -> last HEAD
	unknown   map[string]unknownPolicy
	callSeen  sync.Map // policy -> *atomic.Int64 (unix ns of last call)
	firstSeen map[string]time.Time
}

// unknownPolicy is when CUCM last asked for a policy that does not exist, by
// POST (a call answered Indeterminate) and by HEAD (a keepalive answered
// 404).
type unknownPolicy struct{ post, head time.Time }

func newCURRIWatch() *curriWatch {
	return &curriWatch{lastHead: map[string]time.Time{},
		unknown: map[string]unknownPolicy{}, firstSeen: map[string]time.Time{}}
}

const maxWatchedPolicies = 1000

func (w *curriWatch) call(policy string, known, failed bool, latency time.Duration, now time.Time) {
	w.total.Add(1)
	if failed {
		w.failed.Add(1)
	}
	for {
		cur := w.slowest.Load()
		if int64(latency) <= cur || w.slowest.CompareAndSwap(cur, int64(latency)) {
			break
		}
	}
	if !known {
		w.mu.Lock()
		if u, ok := w.unknown[policy]; ok || len(w.unknown) < maxWatchedPolicies {
			u.post = now
			w.unknown[policy] = u
		}
		w.mu.Unlock()
		return
	}
	if v, ok := w.callSeen.Load(policy); ok {
		v.(*atomic.Int64).Store(now.UnixNano())
		return
	}
	v := new(atomic.Int64)
	v.Store(now.UnixNano())
	w.callSeen.LoadOrStore(policy, v)
}

func (w *curriWatch) head(policy string, known bool, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !known {
		if u, ok := w.unknown[policy]; ok || len(w.unknown) < maxWatchedPolicies {
			u.head = now
			w.unknown[policy] = u
		}
		return
	}
	if _, ok := w.lastHead[policy]; ok || len(w.lastHead) < maxWatchedPolicies {
		w.lastHead[policy] = now
	}
}

// alarmLoop raises and clears alarms from the components' state.
func (s *Server) alarmLoop(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	minute := time.NewTicker(time.Minute)
	defer minute.Stop()
	kpiEvery := s.cfg.AlarmKPIWindow
	if kpiEvery <= 0 {
		kpiEvery = time.Minute
	}
	kpiT := time.NewTicker(kpiEvery)
	defer kpiT.Stop()
	kpis := newKPIWatch()
	feeds := map[string]*feedWatch{}
	var streamLostAt time.Time
	reputationDown := map[string]bool{}
	webhooksFailing := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.checkFeeds(feeds, now)
			s.checkKeepalives(now)
			streamLostAt = s.checkCallsStream(streamLostAt, now)
			s.checkReputation(reputationDown)
			s.checkWebhooks(webhooksFailing)
			s.checkSite(now)
		case <-minute.C:
			s.checkCURRIRates()
		case <-kpiT.C:
			s.checkKPIs(kpis)
		}
	}
}

type feedWatch struct {
	downSince time.Time
	lost      uint64
	lostAt    time.Time
}

func (s *Server) checkFeeds(feeds map[string]*feedWatch, now time.Time) {
	if s.dir == nil {
		return
	}
	seen := map[string]bool{}
	for _, st := range s.dir.mgr.Statuses() {
		seen[st.Name] = true
		src := "feed/" + st.Name
		w := feeds[st.Name]
		if w == nil {
			w = &feedWatch{lost: st.LostToRetention}
			feeds[st.Name] = w
		}
		if st.State == "disconnected" || st.State == "error" {
			if w.downSince.IsZero() {
				w.downSince = now
			}
			if d := now.Sub(w.downSince); d >= s.cfg.AlarmFeedDisconnect {
				s.alarms.Raise(alarmFeedDisconnected, src, obs.Major,
					fmt.Sprintf("feed %s has not been connected for %s: %s", st.Name, d.Round(time.Second), st.LastError))
			}
		} else {
			w.downSince = time.Time{}
			s.alarms.Clear(alarmFeedDisconnected, src)
		}
		if st.Lag > s.cfg.AlarmFeedLag {
			s.alarms.Raise(alarmFeedLag, src, obs.Minor, fmt.Sprintf("feed %s lags %d copies behind (threshold %d)", st.Name, st.Lag, s.cfg.AlarmFeedLag))
		} else {
			s.alarms.Clear(alarmFeedLag, src)
		}
		if st.LostToRetention > w.lost {
			s.alarms.Raise(alarmFeedCopiesLost, src, obs.Critical,
				fmt.Sprintf("feed %s: %d copies deleted by retention before delivery (%d in all)", st.Name, st.LostToRetention-w.lost, st.LostToRetention))
			w.lost, w.lostAt = st.LostToRetention, now
		} else if !w.lostAt.IsZero() && now.Sub(w.lostAt) > 15*time.Minute {
			s.alarms.Clear(alarmFeedCopiesLost, src)
			w.lostAt = time.Time{}
		}
		if lat := time.Duration(st.LatencyP99 * float64(time.Second)); lat > s.cfg.AlarmFeedLatency {
			s.alarms.Raise(alarmFeedLatency, src, obs.Minor, fmt.Sprintf("feed %s: p99 end-to-end latency %s over %s", st.Name, lat.Round(time.Millisecond), s.cfg.AlarmFeedLatency))
		} else {
			s.alarms.Clear(alarmFeedLatency, src)
		}
	}
	for name := range feeds {
		if !seen[name] {
			delete(feeds, name)
			for _, k := range []string{alarmFeedDisconnected, alarmFeedLag, alarmFeedCopiesLost, alarmFeedLatency} {
				s.alarms.Clear(k, "feed/"+name)
			}
		}
	}
}

// checkReputation raises reputation_unavailable for each reputation
// service that failed repeatedly and has not answered since, and clears it
// once it answers.
func (s *Server) checkReputation(raised map[string]bool) {
	down := s.reputation.Down()
	for u, why := range down {
		s.alarms.Raise(alarmReputation, "reputation/"+u, obs.Major,
			fmt.Sprintf("reputation service %s fails (%s): its policies fail open or closed as configured, without waiting for it", u, why))
		raised[u] = true
	}
	for u := range raised {
		if _, ok := down[u]; !ok {
			s.alarms.Clear(alarmReputation, "reputation/"+u)
			delete(raised, u)
		}
	}
}

// checkWebhooks raises webhook_failing for each webhook whose last event
// could not be delivered, and clears it once one is.
func (s *Server) checkWebhooks(raised map[string]bool) {
	failing := s.webhooks.Failing()
	for name, why := range failing {
		s.alarms.Raise(alarmWebhook, "webhook/"+name, obs.Minor, "webhook "+name+": "+why)
		raised[name] = true
	}
	for name := range raised {
		if _, ok := failing[name]; !ok {
			s.alarms.Clear(alarmWebhook, "webhook/"+name)
			delete(raised, name)
		}
	}
}

// checkCallsStream raises calls_stream_dropped when call records were lost
// (queue or producer buffer full, broker errors) since the last check, and
// clears it after a minute without losses.
func (s *Server) checkCallsStream(lostAt, now time.Time) time.Time {
	if s.dir == nil || s.dir.stream == nil {
		return lostAt
	}
	if n, why := s.dir.stream.Lost(); n > 0 {
		s.alarms.Raise(alarmCallsStream, "calls_stream", obs.Major,
			fmt.Sprintf("%d call records not produced to %s in the last 5 s: %s", n, s.dir.stream.Topic(), why))
		return now
	}
	if !lostAt.IsZero() && now.Sub(lostAt) > time.Minute {
		s.alarms.Clear(alarmCallsStream, "calls_stream")
		return time.Time{}
	}
	return lostAt
}

func (s *Server) checkKeepalives(now time.Time) {
	w := s.curriWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	w.callSeen.Range(func(k, v any) bool {
		policy := k.(string)
		last := time.Unix(0, v.(*atomic.Int64).Load())
		if _, ok := w.firstSeen[policy]; !ok {
			w.firstSeen[policy] = last
		}
		head, ok := w.lastHead[policy]
		if !ok {
			head = w.firstSeen[policy] // never probed: count from its first call
		}
		src := "curri/" + policy
		// Only policies with recent traffic are expected to be probed.
		if now.Sub(head) > s.cfg.AlarmKeepaliveTimeout && now.Sub(last) < s.cfg.AlarmKeepaliveTimeout {
			s.alarms.Raise(alarmCURRIKeepalive, src, obs.Major,
				fmt.Sprintf("policy %s has traffic but no CUCM HEAD keepalive since %s", policy, head.UTC().Format(time.RFC3339)))
		} else if now.Sub(head) <= s.cfg.AlarmKeepaliveTimeout {
			s.alarms.Clear(alarmCURRIKeepalive, src)
		}
		return true
	})
	for policy, u := range w.unknown {
		src := "curri/" + policy
		post, head := now.Sub(u.post) <= 10*time.Minute, now.Sub(u.head) <= 10*time.Minute
		var msg string
		switch {
		case post && head:
			msg = fmt.Sprintf("CUCM queries and probes policy %q, which does not exist: keepalives are answered 404 "+
				"(CUCM marks this server down for the profile) and calls get CUCM's failure treatment", policy)
		case head:
			msg = fmt.Sprintf("CUCM probes policy %q, which does not exist: keepalives are answered 404, "+
				"so CUCM marks this server down for the profile and uses its secondary", policy)
		case post:
			msg = fmt.Sprintf("CUCM queries policy %q, which does not exist: its calls get CUCM's failure treatment", policy)
		default:
			delete(w.unknown, policy)
			s.alarms.Clear(alarmCURRIUnknownPolicy, src)
			continue
		}
		s.alarms.Raise(alarmCURRIUnknownPolicy, src, obs.Major, msg)
	}
}

func (s *Server) checkCURRIRates() {
	w := s.curriWatch
	total, failed := w.total.Swap(0), w.failed.Swap(0)
	slowest := time.Duration(w.slowest.Swap(0))
	if total >= 20 && float64(failed)/float64(total) > s.cfg.AlarmCURRIErrorRatio {
		s.alarms.Raise(alarmCURRIErrors, "curri", obs.Major,
			fmt.Sprintf("%d of %d CURRI requests in the last minute answered Indeterminate (%.1f%%)", failed, total, 100*float64(failed)/float64(total)))
	} else {
		s.alarms.Clear(alarmCURRIErrors, "curri")
	}
	if slowest > s.cfg.AlarmCURRILatency {
		s.alarms.Raise(alarmCURRILatency, "curri", obs.Major,
			fmt.Sprintf("slowest CURRI answer in the last minute took %s (threshold %s)", slowest.Round(time.Microsecond), s.cfg.AlarmCURRILatency))
	} else {
		s.alarms.Clear(alarmCURRILatency, "curri")
	}
}
