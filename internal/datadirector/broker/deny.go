package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// Kafka's authorization error codes.
const (
	errTopicAuthorization   int16 = 29 // TOPIC_AUTHORIZATION_FAILED
	errGroupAuthorization   int16 = 30 // GROUP_AUTHORIZATION_FAILED
	errClusterAuthorization int16 = 31 // CLUSTER_AUTHORIZATION_FAILED
	errTxnAuthorization     int16 = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	errSASLAuthentication   int16 = 58 // SASL_AUTHENTICATION_FAILED
	errUnsupportedSASL      int16 = 33 // UNSUPPORTED_SASL_MECHANISM
	errIllegalSASLState     int16 = 34 // ILLEGAL_SASL_STATE
)

// denyResponse is the answer Kafka gives a client not authorized to send
// req: the request's topics, partitions, groups or resources, each with
// the authorization error. nil for a request it cannot answer so (the
// guard closes the connection instead).
func denyResponse(req kmsg.Request) kmsg.Response {
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		out := kmsg.NewPtrProduceResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errTopicAuthorization
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.FetchRequest:
		out := kmsg.NewPtrFetchResponse()
		out.SessionID = r.SessionID
		for _, t := range r.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errTopicAuthorization
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.ListOffsetsRequest:
		out := kmsg.NewPtrListOffsetsResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errTopicAuthorization
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.OffsetForLeaderEpochRequest:
		out := kmsg.NewPtrOffsetForLeaderEpochResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errTopicAuthorization
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.FindCoordinatorRequest:
		out := kmsg.NewPtrFindCoordinatorResponse()
		out.ErrorCode = errGroupAuthorization
		for _, k := range r.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.ErrorCode, c.NodeID = k, errGroupAuthorization, -1
			out.Coordinators = append(out.Coordinators, c)
		}
		resp = out
	case *kmsg.JoinGroupRequest:
		out := kmsg.NewPtrJoinGroupResponse()
		out.ErrorCode, out.Generation = errGroupAuthorization, -1
		resp = out
	case *kmsg.SyncGroupRequest:
		out := kmsg.NewPtrSyncGroupResponse()
		out.ErrorCode = errGroupAuthorization
		resp = out
	case *kmsg.HeartbeatRequest:
		out := kmsg.NewPtrHeartbeatResponse()
		out.ErrorCode = errGroupAuthorization
		resp = out
	case *kmsg.LeaveGroupRequest:
		out := kmsg.NewPtrLeaveGroupResponse()
		out.ErrorCode = errGroupAuthorization
		resp = out
	case *kmsg.ConsumerGroupHeartbeatRequest:
		out := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		out.ErrorCode = errGroupAuthorization
		resp = out
	case *kmsg.DescribeGroupsRequest:
		out := kmsg.NewPtrDescribeGroupsResponse()
		for _, g := range r.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, errGroupAuthorization
			out.Groups = append(out.Groups, rg)
		}
		resp = out
	case *kmsg.OffsetCommitRequest:
		out := kmsg.NewPtrOffsetCommitResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errGroupAuthorization
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.OffsetFetchRequest:
		out := kmsg.NewPtrOffsetFetchResponse()
		out.ErrorCode = errGroupAuthorization
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, errGroupAuthorization
			out.Groups = append(out.Groups, rg)
		}
		resp = out
	case *kmsg.InitProducerIDRequest:
		out := kmsg.NewPtrInitProducerIDResponse()
		out.ErrorCode, out.ProducerID, out.ProducerEpoch = errTxnAuthorization, -1, -1
		if r.TransactionalID == nil {
			out.ErrorCode = errClusterAuthorization
		}
		resp = out
	case *kmsg.CreateTopicsRequest:
		out := kmsg.NewPtrCreateTopicsResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, errTopicAuthorization
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.DeleteTopicsRequest:
		out := kmsg.NewPtrDeleteTopicsResponse()
		names := r.TopicNames
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
		for _, n := range names {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(n), errTopicAuthorization
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.DeleteRecordsRequest:
		out := kmsg.NewPtrDeleteRecordsResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, errTopicAuthorization, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.CreatePartitionsRequest:
		out := kmsg.NewPtrCreatePartitionsResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, errTopicAuthorization
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.DeleteGroupsRequest:
		out := kmsg.NewPtrDeleteGroupsResponse()
		for _, g := range r.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, errGroupAuthorization
			out.Groups = append(out.Groups, rg)
		}
		resp = out
	case *kmsg.ListGroupsRequest:
		resp = kmsg.NewPtrListGroupsResponse() // none it may see
	case *kmsg.AlterConfigsRequest:
		out := kmsg.NewPtrAlterConfigsResponse()
		for _, rs := range r.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = rs.ResourceType, rs.ResourceName, errClusterAuthorization
			out.Resources = append(out.Resources, rr)
		}
		resp = out
	case *kmsg.IncrementalAlterConfigsRequest:
		out := kmsg.NewPtrIncrementalAlterConfigsResponse()
		for _, rs := range r.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = rs.ResourceType, rs.ResourceName, errClusterAuthorization
			out.Resources = append(out.Resources, rr)
		}
		resp = out
	case *kmsg.DescribeConfigsRequest:
		out := kmsg.NewPtrDescribeConfigsResponse()
		for _, rs := range r.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = rs.ResourceType, rs.ResourceName, errClusterAuthorization
			out.Resources = append(out.Resources, rr)
		}
		resp = out
	case *kmsg.CreateACLsRequest:
		out := kmsg.NewPtrCreateACLsResponse()
		for range r.Creations {
			rr := kmsg.NewCreateACLsResponseResult()
			rr.ErrorCode = errClusterAuthorization
			out.Results = append(out.Results, rr)
		}
		resp = out
	case *kmsg.DeleteACLsRequest:
		out := kmsg.NewPtrDeleteACLsResponse()
		for range r.Filters {
			rr := kmsg.NewDeleteACLsResponseResult()
			rr.ErrorCode = errClusterAuthorization
			out.Results = append(out.Results, rr)
		}
		resp = out
	case *kmsg.DescribeACLsRequest:
		out := kmsg.NewPtrDescribeACLsResponse()
		out.ErrorCode = errClusterAuthorization
		resp = out
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		out := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
		seen := map[string]bool{}
		for _, d := range r.Deletions {
			seen[d.Name] = true
		}
		for _, u := range r.Upsertions {
			seen[u.Name] = true
		}
		for name := range seen {
			rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			rr.User, rr.ErrorCode = name, errClusterAuthorization
			out.Results = append(out.Results, rr)
		}
		resp = out
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		out := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
		out.ErrorCode = errClusterAuthorization
		resp = out
	default:
		return nil
	}
	resp.SetVersion(req.GetVersion())
	return resp
}
