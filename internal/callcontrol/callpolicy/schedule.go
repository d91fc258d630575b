package callpolicy

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // schedules name IANA zones; do not depend on the host's zoneinfo
)

// schedule is a compiled Schedule. A window with from > to spans midnight
// and belongs to the day it starts on: "fri 22:00-06:00" covers Friday
// 22:00 to Saturday 06:00. Times are wall-clock in the zone, so on a DST
// change day a window over the skipped hour is shorter, and one over the
// repeated hour longer.
type schedule struct {
	days     uint8 // bit per time.Weekday; all set when Days is empty
	from, to int   // minutes after midnight; from == to == 0: whole day
	loc      *time.Location
}

func compileSchedule(s *Schedule, zones map[string]*time.Location) (*schedule, error) {
	cs := &schedule{loc: time.UTC}
	for i, d := range s.Days {
		wd, ok := weekdays[strings.ToLower(d)]
		if !ok {
			return nil, fieldErr(fmt.Sprintf("schedule.days[%d]", i), "%q is not one of mon tue wed thu fri sat sun", d)
		}
		cs.days |= 1 << wd
	}
	if len(s.Days) == 0 {
		cs.days = 0x7f
	}
	if (s.From == "") != (s.To == "") {
		return nil, fieldErr("schedule", "from and to go together (HH:MM each)")
	}
	if s.From != "" {
		var err error
		if cs.from, err = parseHHMM("schedule.from", s.From); err != nil {
			return nil, err
		}
		if cs.to, err = parseHHMM("schedule.to", s.To); err != nil {
			return nil, err
		}
		if cs.from == cs.to {
			return nil, fieldErr("schedule.to", "equals from; omit both for the whole day")
		}
	}
	if s.TimeZone != "" {
		loc, ok := zones[s.TimeZone]
		if !ok {
			var err error
			loc, err = time.LoadLocation(s.TimeZone)
			if err != nil || s.TimeZone == "Local" {
				return nil, fieldErr("schedule.time_zone", "%q is not an IANA time zone (e.g. Europe/Paris)", s.TimeZone)
			}
			if zones != nil {
				zones[s.TimeZone] = loc
			}
		}
		cs.loc = loc
	}
	return cs, nil
}

func parseHHMM(field, s string) (int, error) {
	if !reHHMM.MatchString(s) {
		return 0, fieldErr(field, "%q is not HH:MM (00:00-23:59)", s)
	}
	return int(s[0]-'0')*600 + int(s[1]-'0')*60 + int(s[3]-'0')*10 + int(s[4]-'0'), nil
}

func (s *schedule) active(now time.Time) bool {
	t := now.In(s.loc)
	wd := t.Weekday()
	if s.from == s.to {
		return s.days&(1<<wd) != 0
	}
	m := t.Hour()*60 + t.Minute()
	if s.from < s.to {
		return s.days&(1<<wd) != 0 && m >= s.from && m < s.to
	}
	if m >= s.from {
		return s.days&(1<<wd) != 0
	}
	if m < s.to {
		return s.days&(1<<((wd+6)%7)) != 0
	}
	return false
}
