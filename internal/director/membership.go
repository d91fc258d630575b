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
// franz-go's cursor, are from before. The reader delivers such a poll only
// once a heartbeat of its member and generation is accepted, and reads it
// again otherwise; franz-go's group callbacks then follow (lost, a new
// membership), and the partitions start again from their commits. The tap
// does the same for shared readers with a fenced commit (tap.prove).
type membership struct {
	proven  atomic.Int64 // unix ns
	session time.Duration
}

// note records a proof: an accepted heartbeat or commit, an assignment.
func (ms *membership) note() { ms.proven.Store(time.Now().UnixNano()) }

// stale reports whether membership was last proven longer ago than a third
// of the session timeout.
func (ms *membership) stale() bool {
	return time.Since(time.Unix(0, ms.proven.Load())) > ms.session/3
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
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.RebalanceInProgress) {
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

// firstOffsets is where each partition of a poll starts: where to read it
// again from.
func firstOffsets(fs kgo.Fetches) map[tp]int64 {
	to := map[tp]int64{}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) > 0 {
			to[tp{p.Topic, p.Partition}] = p.Records[0].Offset
		}
	})
	return to
}
