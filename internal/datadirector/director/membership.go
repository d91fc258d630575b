package director

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// membership is what a feed's own reader knows of its group membership:
// when it was last proven. After a pause (a stopped process, a long GC, a
// cut-off network) longer than a third of the session timeout, the group
// may have dropped the member and given its partitions to another node,
// which delivers and commits them; what the reader polled meanwhile, and
// franz-go's cursor, are from before. The reader holds such a poll until a
// heartbeat of the member whose assignment it last took is accepted, then
// delivers it through the ledger, which leaves out what the partitions'
// callbacks (lost, a new membership starting them from their commits) took
// away meanwhile. It does not move the cursor back: SetOffsets would also
// mark the old position for franz-go's next commit, which a new membership
// would carry past the fence, moving the group's commits backwards. The tap
// proves itself with a fenced commit into its own group (tap.prove).
type membership struct {
	lastProof
	assigned atomic.Pointer[string] // the member id of the last assignment taken (feed.assigned)
	// refused is set when the coordinator refused the member whose
	// assignment was taken (prove), until a new assignment is taken: that
	// membership is over even if the next has the same member id
	// (librdkafka's mock names a member by its address, which the next
	// member can be given).
	refused atomic.Bool
}

// lastProof is when a group membership was last proven: an accepted
// heartbeat or commit, an assignment (a feed's own reader), a fenced commit
// (a tap). The director's readers hand out nothing they polled after a
// pause until it is proven again (reader.poll).
type lastProof struct {
	at      atomic.Int64 // unix ns
	session time.Duration
}

// note records a proof.
func (p *lastProof) note() { p.at.Store(time.Now().UnixNano()) }

// stale reports whether membership was last proven longer ago than a third
// of the session timeout: the process may have been paused (or cut off)
// long enough for the group to give its partitions away.
func (p *lastProof) stale() bool {
	return time.Since(time.Unix(0, p.at.Load())) > p.session/3
}

// took records an assignment taken as member: a proof, and the member
// whose positions the reader now holds.
func (ms *membership) took(member string) {
	ms.assigned.Store(&member)
	ms.refused.Store(false)
	ms.note()
}

// holds reports whether member is the one whose assignment was last taken,
// and the coordinator has not refused it since: what the reader holds is
// that member's to commit.
func (ms *membership) holds(member string) bool {
	return member != "" && member == ms.member() && !ms.refused.Load()
}

// renewed reports whether member, assigned partitions now, is a new
// membership after one whose assignment was taken: another member id, or
// the same after the coordinator refused it.
func (ms *membership) renewed(member string) bool {
	prev := ms.member()
	return prev != "" && (member != prev || ms.refused.Load())
}

// member is the member id of the last assignment taken; "" before one.
func (ms *membership) member() string {
	if a := ms.assigned.Load(); a != nil {
		return *a
	}
	return ""
}

// prove sends the group's coordinator a heartbeat of the client's member
// and generation. Accepted, or answered that a rebalance is under way (the
// member is still in the generation, which nobody else's assignment has
// replaced), the member holds its partitions; refused (unknown member, old
// generation), it does not.
func (ms *membership) prove(ctx context.Context, cl *kgo.Client, group string) error {
	member, gen := cl.GroupMetadata()
	if member == "" {
		return fmt.Errorf("%w: not joined", errNotMember)
	}
	// A client that joined again as a new member holds positions of the
	// old one until its new assignment is taken: no proof before that.
	if ms.member() != member {
		return fmt.Errorf("%w: joined again as a new member, its assignment not yet taken", errNotMember)
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.RebalanceInProgress) {
		ms.refused.Store(true)
		return fmt.Errorf("%w: %w", errNotMember, err)
	}
	ms.note()
	return nil
}

// committed is kgo.AutoCommitCallback: an accepted commit proves the
// membership it was made with.
func (ms *membership) committed(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err != nil || resp == nil {
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return
			}
		}
	}
	ms.note()
}
