package store

import (
	"encoding/json"
	"fmt"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// Rule JSON columns are encoded and decoded 100k at a time by bulk imports
// and LoadPolicies. Match is a flat object of strings, so it gets a direct
// encoder and decoder for the common case (plain printable ASCII), falling
// back to encoding/json for anything else; actions and schedules repeat
// across rules, so they are memoised per bulk operation.

// plainJSON reports whether s can be written between quotes as is, exactly
// as encoding/json would write it.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// encodeMatch writes m as encoding/json does (same field order, omitempty).
func encodeMatch(m *callpolicy.Match) (string, error) {
	if *m == (callpolicy.Match{}) {
		return "{}", nil
	}
	if m.Neighbourhood != nil { // an object: encoding/json's job
		out, err := json.Marshal(m)
		return string(out), err
	}
	fields := [...]struct{ k, v string }{
		{"calling", m.Calling}, {"called", m.Called},
		{"transformed_calling", m.TransformedCalling}, {"transformed_called", m.TransformedCalled},
		{"trigger_point", m.TriggerPoint}, {"device_name", m.DeviceName},
	}
	b := make([]byte, 0, 64)
	b = append(b, '{')
	for _, f := range fields {
		if f.v == "" {
			continue
		}
		if !plainJSON(f.v) {
			out, err := json.Marshal(m)
			return string(out), err
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.k...)
		b = append(b, `":"`...)
		b = append(b, f.v...)
		b = append(b, '"')
	}
	b = append(b, '}')
	return string(b), nil
}

// decodeMatch parses what encodeMatch writes; anything else (escapes,
// whitespace, unknown keys) goes to encoding/json.
func decodeMatch(b []byte, m *callpolicy.Match) error {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return json.Unmarshal(b, m)
	}
	i := 1
	for i < len(b)-1 {
		key, n, ok := plainString(b, i)
		if !ok || n >= len(b) || b[n] != ':' {
			return json.Unmarshal(b, m)
		}
		val, n2, ok := plainString(b, n+1)
		if !ok {
			return json.Unmarshal(b, m)
		}
		switch key {
		case "calling":
			m.Calling = val
		case "called":
			m.Called = val
		case "transformed_calling":
			m.TransformedCalling = val
		case "transformed_called":
			m.TransformedCalled = val
		case "trigger_point":
			m.TriggerPoint = val
		case "device_name":
			m.DeviceName = val
		default:
			return json.Unmarshal(b, m)
		}
		i = n2
		if i < len(b)-1 {
			if b[i] != ',' {
				return json.Unmarshal(b, m)
			}
			i++
		}
	}
	return nil
}

// plainString reads a quoted string without escapes starting at b[i] and
// returns it and the index after the closing quote.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f: // escapes, control bytes, UTF-8: encoding/json's job
			return "", 0, false
		}
	}
	return "", 0, false
}

// actionKey makes an Action comparable by value (Modify is a pointer).
type actionKey struct {
	a    callpolicy.Action
	m    callpolicy.Modify
	hasM bool
}

func keyOf(a *callpolicy.Action) actionKey {
	k := actionKey{a: *a}
	k.a.Modify = nil
	if a.Modify != nil {
		k.m, k.hasM = *a.Modify, true
	}
	return k
}

// ruleCodec encodes or decodes the JSON columns of many rules, reusing the
// results for repeated actions and schedules. Not safe for concurrent use.
type ruleCodec struct {
	actionsOut map[actionKey]string
	actionsIn  map[string]callpolicy.Action
	schedIn    map[string]callpolicy.Schedule
}

func (c *ruleCodec) encode(r *callpolicy.Rule) (encodedRule, error) {
	var e encodedRule
	var err error
	if e.match, err = encodeMatch(&r.Match); err != nil {
		return e, fmt.Errorf("match: %w", err)
	}
	k := keyOf(&r.Action)
	if s, ok := c.actionsOut[k]; ok {
		e.action = s
	} else {
		b, err := json.Marshal(r.Action)
		if err != nil {
			return e, fmt.Errorf("action: %w", err)
		}
		e.action = string(b)
		if c.actionsOut == nil {
			c.actionsOut = map[actionKey]string{}
		}
		if len(c.actionsOut) < 4096 {
			c.actionsOut[k] = e.action
		}
	}
	if r.Schedule != nil {
		b, err := json.Marshal(r.Schedule)
		if err != nil {
			return e, fmt.Errorf("schedule: %w", err)
		}
		e.schedule = string(b)
	}
	if len(r.Tags) > 0 {
		b, err := json.Marshal(r.Tags)
		if err != nil {
			return e, fmt.Errorf("tags: %w", err)
		}
		e.tags = string(b)
	}
	return e, nil
}

func (c *ruleCodec) decodeAction(b []byte, a *callpolicy.Action) error {
	if v, ok := c.actionsIn[string(b)]; ok {
		*a = v
		if v.Modify != nil { // each rule gets its own Modify
			m := *v.Modify
			a.Modify = &m
		}
		return nil
	}
	if err := json.Unmarshal(b, a); err != nil {
		return err
	}
	if c.actionsIn == nil {
		c.actionsIn = map[string]callpolicy.Action{}
	}
	if len(c.actionsIn) < 4096 {
		v := *a
		if a.Modify != nil {
			m := *a.Modify
			v.Modify = &m
		}
		c.actionsIn[string(b)] = v
	}
	return nil
}

func (c *ruleCodec) decodeSchedule(b []byte) (*callpolicy.Schedule, error) {
	if v, ok := c.schedIn[string(b)]; ok {
		v.Days = append([]string(nil), v.Days...)
		return &v, nil
	}
	var s callpolicy.Schedule
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if c.schedIn == nil {
		c.schedIn = map[string]callpolicy.Schedule{}
	}
	if len(c.schedIn) < 4096 {
		v := s
		v.Days = append([]string(nil), s.Days...)
		c.schedIn[string(b)] = v
	}
	return &s, nil
}
