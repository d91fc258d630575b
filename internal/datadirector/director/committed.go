package director

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committed fetches group's committed offsets of the partitions parts
// names, -1 where there is none. It names every partition in the request:
// asking for all of a group's offsets at once (a null topic list) is not
// answered by every implementation of the protocol (librdkafka's mock
// cluster returns nothing).
func (m *Manager) committed(ctx context.Context, group string, parts map[string][]int32) (kadm.OffsetResponses, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	for topic, ps := range parts {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic = topic
		rt.Partitions = ps
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, m.admin)
	if err != nil {
		return nil, fmt.Errorf("fetch %s's offsets: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		// A group the broker does not know has committed nothing: Kafka
		// answers so with -1 offsets, kfake (the embedded broker) with
		// GROUP_ID_NOT_FOUND. As an error it failed the whole tap's fetch
		// for every feed on it, over one feed whose group was gone.
		if errors.Is(err, kerr.GroupIDNotFound) {
			return kadm.OffsetResponses{}, nil
		}
		return nil, fmt.Errorf("fetch %s's offsets: %w", group, err)
	}
	out := kadm.OffsetResponses{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			o := kadm.OffsetResponse{Offset: kadm.Offset{Topic: rt.Topic, Partition: rp.Partition, At: rp.Offset, LeaderEpoch: rp.LeaderEpoch}}
			if rp.Metadata != nil {
				o.Metadata = *rp.Metadata
			}
			o.Err = kerr.ErrorForCode(rp.ErrorCode)
			if out[rt.Topic] == nil {
				out[rt.Topic] = map[int32]kadm.OffsetResponse{}
			}
			out[rt.Topic][rp.Partition] = o
		}
	}
	return out, nil
}

// eachPart calls fn with every partition parts names (as franz-go's group
// callbacks give them).
func eachPart(parts map[string][]int32, fn func(k tp)) {
	for topic, ps := range parts {
		for _, p := range ps {
			fn(tp{topic, p})
		}
	}
}

// partsOf is the partitions offs names, by topic.
func partsOf[V any](offs map[string]map[int32]V) map[string][]int32 {
	out := make(map[string][]int32, len(offs))
	for topic, ps := range offs {
		for p := range ps {
			out[topic] = append(out[topic], p)
		}
	}
	return out
}
