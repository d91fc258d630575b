package director

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/testkit"
)

// The offsets and hand-over tests run against two independent
// implementations of the Kafka protocol: franz-go's kfake (what the
// embedded broker is made of) and librdkafka's mock cluster (C, through
// confluent-kafka-go's bundled librdkafka 2.11.1), so that they hold for
// Kafka's protocol and not for one implementation's reading of it.
//
// What differs between the two, as these tests use them (librdkafka's
// src/rdkafka_mock_handlers.c and rdkafka_mock_cgrp.c, v2.11.1):
//   - franz-go cannot read the mock's ApiVersions answers from v3 on: the
//     mock handcrafts them, and to franz-go's v4 request (UNSUPPORTED_VERSION,
//     which must be answered in v0's form) it writes the key count as a
//     flexible-version byte. Clients of the mock cap their versions at
//     Kafka 2.3's (ClientConfig.MaxVersion), whose ApiVersions is v2:
//     older Fetch, Metadata, OffsetCommit and JoinGroup versions than
//     kfake is asked for, a difference of its own.
//   - The mock answers no CreateTopics, DescribeGroups, DeleteGroups or
//     DescribeConfigs: topics are made up front (mc.CreateTopic), lag
//     (which describes groups) is not reported, and tests learn who holds
//     what from the nodes themselves, not from the group.
//   - The mock refuses a commit without a member (generation -1) to a group
//     it has ever seen members in, where Kafka and kfake accept one into an
//     empty group: a feed's group must never have had members for its tap
//     to commit there. Taps' commits go to groups that only taps write.
//   - kfake enforces a minimum session timeout of 6 s (Kafka's default);
//     the mock has none. But a mock rebalance round waits session timeout
//     minus 1 s for members that are already in (Kafka ends the round when
//     all known members have rejoined), so the tests give mock nodes 3 s.
//   - Taking a broker down: kfake moves its partitions' leadership and its
//     groups to the others (RemoveNode); the mock keeps the broker's
//     partitions on it, unavailable until it comes back (SetBrokerDown,
//     SetBrokerUp).
type testCluster struct {
	kind       string
	brokers    []string
	maxVersion string                    // broker.ClientConfig.MaxVersion
	session    time.Duration             // the session timeout the tests' nodes use
	down       func(t *testing.T, i int) // takes broker i (from 0) down
	up         func(t *testing.T, i int) // and back; nil where down is for good
	kfake      *kfake.Cluster            // the kfake cluster, for its request controls; nil on the mock
}

func (c *testCluster) ClientConfig() broker.ClientConfig {
	return broker.ClientConfig{Brokers: c.brokers, MaxVersion: c.maxVersion}
}

const (
	kfakeCluster      = "kfake"
	librdkafkaCluster = "librdkafka-mock"
)

// clusterTopics are made in every test cluster: the NF topics, the DLQ,
// a feed output, and the re-key topic of an xdr feed named "tx".
var clusterTopics = append(append([]broker.TopicSpec{}, testTopics...),
	broker.TopicSpec{Name: RekeyTopic("tx"), Partitions: rekeyPartitions})

// startCluster starts a cluster of kind with n brokers for the test.
func startCluster(t *testing.T, kind string, n int) *testCluster {
	t.Helper()
	switch kind {
	case kfakeCluster:
		// A 3 s session, as on librdkafka's mock: kfake's default minimum
		// (6 s, Kafka's) would double every wait on a session's end.
		opts := []kfake.Opt{kfake.NumBrokers(n), kfake.GroupMinSessionTimeout(time.Second)}
		for _, tp := range clusterTopics {
			opts = append(opts, kfake.SeedTopics(int32(tp.Partitions), tp.Name))
		}
		kc, err := kfake.NewCluster(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kc.Close)
		return &testCluster{kind: kind, brokers: kc.ListenAddrs(), session: 3 * time.Second, kfake: kc, down: func(t *testing.T, i int) {
			if err := kc.RemoveNode(int32(i)); err != nil {
				t.Fatalf("kfake: remove broker %d: %v", i, err)
			}
		}}
	case librdkafkaCluster:
		mc, err := kafka.NewMockCluster(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mc.Close)
		for _, tp := range clusterTopics {
			if err := mc.CreateTopic(tp.Name, tp.Partitions, 1); err != nil {
				t.Fatalf("librdkafka mock: create %s: %v", tp.Name, err)
			}
		}
		return &testCluster{kind: kind, brokers: strings.Split(mc.BootstrapServers(), ","), maxVersion: "2.3", session: 3 * time.Second,
			down: func(t *testing.T, i int) {
				if err := mc.SetBrokerDown(i + 1); err != nil {
					t.Fatalf("librdkafka mock: broker %d down: %v", i+1, err)
				}
			},
			up: func(t *testing.T, i int) {
				if err := mc.SetBrokerUp(i + 1); err != nil {
					t.Fatalf("librdkafka mock: broker %d up: %v", i+1, err)
				}
			}}
	}
	panic(fmt.Sprintf("cluster kind %q", kind))
}

// onEachCluster runs fn as a subtest on a fresh cluster of each kind with
// n brokers (kfake only in -short), one after the other: run side by side under the race
// detector, librdkafka's mock took over a minute to reassign what a broker
// outage moved (TestBrokerDownMidStream).
func onEachCluster(t *testing.T, n int, fn func(t *testing.T, c *testCluster)) {
	for _, kind := range []string{kfakeCluster, librdkafkaCluster} {
		t.Run(kind, func(t *testing.T) {
			if kind == librdkafkaCluster {
				testkit.Long(t, "librdkafka's mock cluster waits out its rebalances for tens of seconds")
			}
			fn(t, startCluster(t, kind, n))
		})
	}
}
