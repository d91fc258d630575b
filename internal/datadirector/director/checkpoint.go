package director

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
)

// An exactly-once xdr feed's checkpoints (xdrtxn.go): where each committed
// transaction left the feed's reader in a partition, kept in a compacted
// topic of one partition per feed, keyed by source partition.

// CheckpointTopic is the compacted topic an exactly-once xdr feed writes its
// checkpoints to, in the transactions that commit its offsets.
func CheckpointTopic(feed string) string { return "signalbox.checkpoints." + feed }

// checkpointTopicSpec is the checkpoint topic as it is created: compacted,
// so that it keeps about one checkpoint per source partition, with
// segments that roll every 10 minutes for the compaction to reach them.
func checkpointTopicSpec(feed string) broker.TopicSpec {
	return broker.TopicSpec{Name: CheckpointTopic(feed), Partitions: 1, Configs: map[string]string{
		"cleanup.policy":            "compact",
		"segment.ms":                "600000",
		"min.cleanable.dirty.ratio": "0.1",
	}}
}

// checkpoint is where a committed transaction left a partition: every copy
// below next was read, and open are the offsets (ascending, below next) of
// the copies of the transactions still open. The offset committed with it
// is the first of them, else next.
type checkpoint struct {
	next int64
	open []int64
}

func (c *checkpoint) commit() int64 {
	if len(c.open) > 0 {
		return c.open[0]
	}
	return c.next
}

func (c *checkpoint) equal(o *checkpoint) bool {
	return c.next == o.next && slices.Equal(c.open, o.open)
}

// checkpointVersion is the first byte of an encoded checkpoint.
const checkpointVersion = 1

// appendTo encodes c: the version, next, the number of open offsets, and
// each open offset as its distance from the one before (the first: from
// 0), all as unsigned varints.
func (c *checkpoint) appendTo(b []byte) []byte {
	b = append(b, checkpointVersion)
	b = binary.AppendUvarint(b, uint64(c.next))
	b = binary.AppendUvarint(b, uint64(len(c.open)))
	prev := int64(0)
	for _, o := range c.open {
		b = binary.AppendUvarint(b, uint64(o-prev))
		prev = o
	}
	return b
}

// parseCheckpoint decodes what appendTo encoded, refusing anything else with
// the reason.
func parseCheckpoint(b []byte) (checkpoint, error) {
	var c checkpoint
	if len(b) == 0 || b[0] != checkpointVersion {
		return c, errors.New("not a version 1 checkpoint")
	}
	b = b[1:]
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, fmt.Errorf("truncated at %s", what)
		}
		b = b[n:]
		return v, nil
	}
	nx, err := next("next")
	if err != nil {
		return c, err
	}
	cnt, err := next("the count")
	if err != nil {
		return c, err
	}
	if nx > 1<<62 || cnt > uint64(len(b)) {
		return c, fmt.Errorf("next %d with %d open offsets in %d bytes", nx, cnt, len(b))
	}
	c.next = int64(nx)
	c.open = make([]int64, 0, cnt)
	prev := int64(-1)
	at := int64(0)
	for i := range cnt {
		d, err := next("open offset " + strconv.FormatUint(i, 10))
		if err != nil {
			return c, err
		}
		at += int64(d)
		if d > 1<<62 || at <= prev || at >= c.next {
			return c, fmt.Errorf("open offset %d: %d is not above %d and below next %d", i, at, prev, c.next)
		}
		c.open = append(c.open, at)
		prev = at
	}
	if len(b) != 0 {
		return c, fmt.Errorf("%d bytes after the open offsets", len(b))
	}
	return c, nil
}

// checkpointKey names a source partition in the checkpoint topic.
func checkpointKey(k tp) []byte {
	return strconv.AppendInt(append([]byte(k.topic), '/'), int64(k.partition), 10)
}

func parseCheckpointKey(b []byte) (tp, bool) {
	s := string(b)
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return tp{}, false
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || p < 0 {
		return tp{}, false
	}
	return tp{s[:i], int32(p)}, true
}

// readCheckpoints reads the feed's checkpoint topic to its last stable
// offset and returns the last checkpoint of each source partition. A
// record that is not a checkpoint is logged, counted and passed over: its
// partition is taken up without one.
func (f *feed) readCheckpoints(ctx context.Context, adm *kadm.Client) (map[tp]checkpoint, error) {
	topic := CheckpointTopic(f.spec.Name)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A topic created a moment ago (ensureOutputs) may be unknown to the
	// client's metadata for a while yet.
	var (
		starts kadm.ListedOffsets
		err    error
	)
	for {
		starts, err = adm.ListStartOffsets(ctx, topic)
		if err == nil {
			err = starts.Error()
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			break
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints %s: %w", topic, err)
	}
	// Every transaction that wrote to the topic so far is decided once the
	// last stable offset reaches its end: the last checkpoints of the
	// transactions that committed the offsets the reader starts from are
	// then readable, or were aborted with them (a node that died with one
	// open leaves it for up to the transaction timeout).
	hw, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = hw.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints %s: %w", topic, err)
	}
	high, _ := hw.Lookup(topic, 0)
	var ends kadm.ListedOffsets
	for {
		ends, err = adm.ListCommittedOffsets(ctx, topic) // the last stable offset
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoints %s: %w", topic, err)
		}
		if e, _ := ends.Lookup(topic, 0); e.Offset >= high.Offset {
			break
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return nil, fmt.Errorf("checkpoints %s: a transaction stays open below offset %d: %w", topic, high.Offset, ctx.Err())
		}
	}
	s, _ := starts.Lookup(topic, 0)
	e, _ := ends.Lookup(topic, 0)
	out := map[tp]checkpoint{}
	if e.Offset <= s.Offset {
		return out, nil
	}
	cl, err := kgo.NewClient(append(f.m.cfg.Client.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(s.Offset)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The transaction markers too, so that reading ends at the last
		// stable offset even when a marker is the last record before it.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, fmt.Errorf("checkpoints %s: %w", topic, err)
	}
	defer cl.Close()
	for done := false; !done; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("checkpoints %s: reading to offset %d: %w", topic, e.Offset, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			return nil, fmt.Errorf("checkpoints %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			done = done || r.Offset >= e.Offset-1
			if r.Attrs.IsControl() {
				return
			}
			k, ok := parseCheckpointKey(r.Key)
			if !ok {
				f.badCheckpoint(r, errors.New("the key names no partition"))
				return
			}
			if r.Value == nil { // a tombstone
				delete(out, k)
				return
			}
			cp, err := parseCheckpoint(r.Value)
			if err != nil {
				f.badCheckpoint(r, err)
				delete(out, k)
				return
			}
			out[k] = cp
		})
	}
	return out, nil
}

func (f *feed) badCheckpoint(r *kgo.Record, err error) {
	f.log.Error("xdr feed: not a checkpoint", "topic", r.Topic, "offset", r.Offset, "key", string(r.Key), "err", err)
	f.m.m.checkpoints.WithLabelValues(f.spec.Name, "invalid").Inc()
}
