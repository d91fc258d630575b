package api

import (
	"net/http"

	"github.com/signalbox/signalbox/internal/platform/obs"
)

// AlarmSource is the alarm list as the API reads it (obs.Alarms).
type AlarmSource interface {
	Active() []obs.Alarm
	// History returns at most limit cleared alarms, newest first.
	History(limit int) []obs.Alarm
}

const (
	defaultAlarmHistory = 100
	maxAlarmHistory     = 1000
)

// getAlarms answers GET /api/v1/alarms?limit= with the active alarms and the
// most recent cleared ones.
func (s *server) getAlarms(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Alarms == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "alarms are not available in this process"})
		return
	}
	limit := defaultAlarmHistory
	if raw := r.URL.Query().Get("limit"); raw != "" {
		var err error
		if limit, err = wholeParam("limit", raw, 0, maxAlarmHistory); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	active := s.cfg.Alarms.Active()
	if active == nil {
		active = []obs.Alarm{}
	}
	var hist []obs.Alarm
	if limit > 0 {
		hist = s.cfg.Alarms.History(limit)
	}
	if hist == nil {
		hist = []obs.Alarm{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"active": active, "history": hist})
}
