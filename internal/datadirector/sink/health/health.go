// Package health is what a sink reports of its delivery, for the feed's
// status and metrics: whether it is connected to its consumer, how many
// times it retried, and its last error. A sink embeds a State, so that its
// Connected, Retries and LastError are the State's.
package health

import "sync/atomic"

// State is a sink's delivery state; safe for concurrent use, the zero value
// is disconnected with no retries and no error.
type State struct {
	connected atomic.Bool
	retries   atomic.Uint64
	lastErr   atomic.Pointer[string]
}

// Connected reports whether the sink's last attempt reached its consumer.
func (s *State) Connected() bool { return s.connected.Load() }

// Retries counts the sink's retried attempts (what one is, its sink says).
func (s *State) Retries() uint64 { return s.retries.Load() }

// LastError is the most recent delivery error ("" if none).
func (s *State) LastError() string {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// SetConnected records whether the consumer is reached.
func (s *State) SetConnected(ok bool) { s.connected.Store(ok) }

// Retried counts one retried attempt.
func (s *State) Retried() { s.retries.Add(1) }

// SetErr records err as the last error.
func (s *State) SetErr(err error) {
	msg := err.Error()
	s.lastErr.Store(&msg)
}
