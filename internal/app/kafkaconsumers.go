package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/platform/api"
)

// ConsumersFile keeps the kafka feeds' consumer credentials (0600, in the
// data directory, as the admin token): the embedded broker is this node's,
// and so are the credentials of its topics.
const ConsumersFile = "kafka-consumers.json"

// kafkaUsers are the embedded broker's users: the fixed ones (nf, site)
// and the consumer credential of each kafka feed that has one
// (api.KafkaCredentials: issued and revoked through the API, dropped with
// their feed).
type kafkaUsers struct {
	path string
	base []broker.User

	mu        sync.Mutex
	b         *broker.Broker // set once the broker runs
	consumers map[string]consumerCred
}

// consumerCred is one feed's consumer credential, as kept.
type consumerCred struct {
	Feed        string    `json:"feed"`
	User        string    `json:"user"`
	Password    string    `json:"password"`
	Topic       string    `json:"topic"`
	GroupPrefix string    `json:"group_prefix"`
	Issued      time.Time `json:"issued"`
}

// newKafkaUsers reads the consumer credentials kept in dataDir.
func newKafkaUsers(dataDir string, base []broker.User) (*kafkaUsers, error) {
	ku := &kafkaUsers{path: filepath.Join(dataDir, ConsumersFile), base: base, consumers: map[string]consumerCred{}}
	b, err := os.ReadFile(ku.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("kafka consumer credentials: %w", err)
	default:
		var list []consumerCred
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("kafka consumer credentials %s: %w", ku.path, err)
		}
		for _, c := range list {
			ku.consumers[c.Feed] = c
		}
	}
	return ku, nil
}

// users is every user the broker knows (under mu).
func (ku *kafkaUsers) users() []broker.User {
	list := slices.Clone(ku.base)
	for _, feed := range slices.Sorted(maps.Keys(ku.consumers)) {
		c := ku.consumers[feed]
		list = append(list, broker.User{Name: c.User, Password: c.Password, Role: broker.RoleConsumer,
			Topics: []string{c.Topic}, GroupPrefix: c.GroupPrefix})
	}
	return list
}

// apply keeps the credentials and gives them to the broker (under mu).
func (ku *kafkaUsers) apply() error {
	list := make([]consumerCred, 0, len(ku.consumers))
	for _, feed := range slices.Sorted(maps.Keys(ku.consumers)) {
		list = append(list, ku.consumers[feed])
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	tmp := ku.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("kafka consumer credentials: %w", err)
	}
	if err := os.Rename(tmp, ku.path); err != nil {
		return fmt.Errorf("kafka consumer credentials: %w", err)
	}
	if ku.b == nil {
		return nil
	}
	return ku.b.SetUsers(ku.users())
}

// Issue makes the feed's consumer credential, or a new password for it.
func (ku *kafkaUsers) Issue(_ context.Context, spec *director.FeedSpec) (api.KafkaCredential, error) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return api.KafkaCredential{}, err
	}
	user := "feed-" + spec.Name
	c := consumerCred{Feed: spec.Name, User: user, Password: base64.RawURLEncoding.EncodeToString(raw[:]), Topic: spec.Topic,
		GroupPrefix: user, Issued: time.Now().UTC()}
	ku.mu.Lock()
	defer ku.mu.Unlock()
	old, had := ku.consumers[spec.Name]
	ku.consumers[spec.Name] = c
	if err := ku.apply(); err != nil {
		if had {
			ku.consumers[spec.Name] = old
		} else {
			delete(ku.consumers, spec.Name)
		}
		return api.KafkaCredential{}, err
	}
	var brokers []string
	if ku.b != nil {
		brokers = ku.b.Addrs()
	}
	return api.KafkaCredential{User: c.User, Password: c.Password, Mechanism: broker.MechScramSHA512, Topic: c.Topic,
		GroupPrefix: c.GroupPrefix, Brokers: brokers}, nil
}

// Revoke removes the feed's consumer credential.
func (ku *kafkaUsers) Revoke(_ context.Context, feed string) (bool, error) {
	ku.mu.Lock()
	defer ku.mu.Unlock()
	c, ok := ku.consumers[feed]
	if !ok {
		return false, nil
	}
	delete(ku.consumers, feed)
	if err := ku.apply(); err != nil {
		ku.consumers[feed] = c
		return false, err
	}
	return true, nil
}

// retain drops the credentials of feeds no longer stored (or no longer
// producing into the topic they were issued for).
func (ku *kafkaUsers) retain(specs []director.FeedSpec) error {
	topics := map[string]string{}
	for _, sp := range specs {
		if sp.Kafka == nil {
			topics[sp.Name] = sp.Topic
		}
	}
	ku.mu.Lock()
	defer ku.mu.Unlock()
	changed := false
	for feed, c := range ku.consumers {
		if t, ok := topics[feed]; !ok || t != c.Topic {
			delete(ku.consumers, feed)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return ku.apply()
}
