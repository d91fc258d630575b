package director

import (
	"context"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

// Sink delivers batches of copies to one third-party endpoint. Sinks live in
// internal/datadirector/sink/* and satisfy this interface structurally (they do not import
// director, which constructs them).
type Sink interface {
	// Send delivers batch in order and returns nil once every copy is
	// confirmed: written to the connection (synthetic), answered 2xx
	// (http2), or acknowledged by the broker (kafka). On error the feed
	// treats the whole batch as undelivered and sends it again, so delivery
	// is at-least-once. Send must not retain batch or its copies after it
	// returns.
	Send(ctx context.Context, batch []*nfcopy.Copy) error
	// Close releases connections; Send is not called after Close.
	Close() error
}

// PipelinedSink is a Sink whose confirmation can be awaited apart from the
// write (the synthetic sink waits for the consumer's TCP acknowledgement, the
// kafka sink for the broker's), so that a feed encodes and writes its next
// batch meanwhile. A feed still commits a batch's offsets only once it is
// confirmed, in poll order.
type PipelinedSink interface {
	Sink
	// Write writes batch in order after everything written before and
	// returns its ticket; tickets grow, and confirming one confirms every
	// earlier one. Write must not retain the batch slice after it returns;
	// the copies themselves stay valid until their ticket is confirmed or
	// fails (the kafka sink's records alias their Raw until acknowledged).
	Write(ctx context.Context, batch []*nfcopy.Copy) (uint64, error)
	// Confirmed reports whether the batch of ticket t is confirmed. An
	// error means it never will be: every batch written since the last
	// confirmed one must be written again, in order.
	Confirmed(t uint64) (bool, error)
}

// SharedEncoder is a pipelined sink part of whose encoding of a copy does
// not depend on its connection (the synthetic sink), so that a tap has that
// part made once for all its members' sinks of one ShareKey
// (decodedPoll.share) and hands it to each with the batch (WriteShared);
// the sink encodes a copy itself when the Shared has none of its key.
type SharedEncoder interface {
	ShareKey() any // comparable; nil: the sink shares no encoding
	NewShared() *synthetic.Shared
	WriteShared(ctx context.Context, batch []*nfcopy.Copy, sh *synthetic.Shared) (uint64, error)
}

// RejectingSink is a sink that sets aside a copy it can never deliver (a
// record over the target's size limit, an HTTP 413) instead of failing its
// batch: the batch counts as delivered, and the feed sends the copies set
// aside to the dead-letter topic with the reason, so one poison copy cannot
// hold a feed in a retry loop. Rejected returns, and forgets, the copies set
// aside in the batches confirmed so far (by Send, or up to the ticket last
// confirmed); they stay valid until those batches are released.
type RejectingSink interface {
	Rejected() (copies []*nfcopy.Copy, reasons []string)
}

// FlowCounter is a sink that keeps a table of flows (synthetic) and counts,
// since it was made, those it closed to make room for others
// (signalbox_feed_flows_evicted_total) and the responses it wrote before
// their request (signalbox_feed_responses_first_total).
type FlowCounter interface {
	FlowsEvicted() uint64
	ResponsesFirst() uint64
}

// Connecter is a sink that can reach its consumer before it has a copy to
// send (synthetic): the feed connects it as it starts (feed.connectEarly).
type Connecter interface {
	Connect(ctx context.Context) error
}

// sinkCaps is a sink with what it can do beyond Send, found once, as the
// feed takes it (capsOf): the one place the optional interfaces are looked
// for. A capability the sink lacks is nil.
type sinkCaps struct {
	Sink
	pipelined PipelinedSink // write and confirm apart (feed.deliverPipelined)
	shared    SharedEncoder // takes a tap's shared encoding
	origin    originWriter  // writes each record's origin (a re-key stage's kafka sink)
	rejecting RejectingSink // sets aside copies it can never deliver
	flows     FlowCounter   // counts the flows it evicted, responses it wrote first
	connecter Connecter     // reaches its consumer before the first copy
}

// capsOf finds s's capabilities.
func capsOf(s Sink) sinkCaps {
	c := sinkCaps{Sink: s}
	c.pipelined, _ = s.(PipelinedSink)
	c.shared, _ = s.(SharedEncoder)
	c.origin, _ = s.(originWriter)
	c.rejecting, _ = s.(RejectingSink)
	c.flows, _ = s.(FlowCounter)
	c.connecter, _ = s.(Connecter)
	return c
}

// FieldError is a feed validation error naming the offending field.
type FieldError = sinkspec.FieldError
