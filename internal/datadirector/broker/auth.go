package broker

import (
	"crypto/sha512"
	"crypto/subtle"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Who may do what on the embedded broker. kfake serves every request it is
// handed; the guard decides which it is handed. A client on this host (a
// connection from one of its own addresses) is trusted as signalbox itself
// is: whoever runs processes here can read the data directory anyway. A
// client from another host authenticates (SASL SCRAM-SHA-512 or -256, or
// PLAIN) as one of the broker's users, and each request it sends is
// authorized by its user's role; what is refused is answered with Kafka's
// authorization error, counted and logged.

// Role is what a user may do.
type Role int

const (
	// RoleAdmin may do everything: signalbox's own clients, the peer site.
	RoleAdmin Role = iota
	// RoleProducer may produce to its Topics (and read metadata): an NF.
	RoleProducer
	// RoleConsumer may read its Topics with consumer groups whose names
	// begin with its GroupPrefix: a kafka feed's consumer.
	RoleConsumer
)

func (r Role) String() string {
	return [...]string{"admin", "producer", "consumer"}[r]
}

// User is a credential of the embedded broker.
type User struct {
	Name, Password string
	Role           Role
	Topics         []string // what a producer may write, a consumer read
	GroupPrefix    string   // a consumer's groups begin with it
}

// Anonymous says which clients need no credential.
type Anonymous int

const (
	AnonymousLocal Anonymous = iota // clients on this host (the default)
	AnonymousNone                   // nobody: every client authenticates
	AnonymousAll                    // everybody (-kafka-allow-anonymous): the broker is open
)

// Refusal reasons of authentication and authorization.
const (
	RefusedUnauthenticated = "unauthenticated" // a request before (or without) authenticating
	RefusedAuthFailed      = "auth_failed"     // a wrong user or password
	RefusedDenied          = "denied"          // a request the user's role does not allow
)

// credential is a user as the guard keeps it: no password, its keys.
type credential struct {
	User
	plain [sha512.Size]byte // SHA-512 of the password, for PLAIN
	scram map[string]scramKeys
}

// users is the broker's credentials, replaceable while it runs.
type users struct {
	mu sync.RWMutex
	m  map[string]*credential
}

func newUsers(list []User) (*users, error) {
	u := &users{}
	return u, u.set(list)
}

// set replaces the credentials with list.
func (u *users) set(list []User) error {
	m := make(map[string]*credential, len(list))
	for _, usr := range list {
		if usr.Name == "" || usr.Password == "" {
			return fmt.Errorf("broker: a user needs a name and a password")
		}
		c := &credential{User: usr, plain: sha512.Sum512([]byte(usr.Password)), scram: map[string]scramKeys{}}
		for _, mech := range []string{MechScramSHA512, MechScramSHA256} {
			k, err := newScramKeys(mech, usr.Password)
			if err != nil {
				return err
			}
			c.scram[mech] = k
		}
		c.Password = ""
		m[usr.Name] = c
	}
	u.mu.Lock()
	u.m = m
	u.mu.Unlock()
	return nil
}

func (u *users) get(name string) (*credential, bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	c, ok := u.m[name]
	return c, ok
}

// localAddrs tells whether an address is one of this host's, refreshing
// its list of interface addresses at most every 30 s.
type localAddrs struct {
	mu   sync.Mutex
	at   time.Time
	list []net.IP
}

func (l *localAddrs) has(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.at) > 30*time.Second {
		l.at, l.list = time.Now(), nil
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				l.list = append(l.list, n.IP)
			}
		}
	}
	return slices.ContainsFunc(l.list, ip.Equal)
}

// trusted reports whether the client of c needs no credential.
func (g *guard) trusted(c net.Conn) bool {
	switch g.anonymous {
	case AnonymousAll:
		return true
	case AnonymousNone:
		return false
	}
	ra, _ := c.RemoteAddr().(*net.TCPAddr)
	la, _ := c.LocalAddr().(*net.TCPAddr)
	if ra == nil {
		return false
	}
	return la != nil && ra.IP.Equal(la.IP) || g.local.has(ra.IP)
}

// authorize decides whether cred may send req; what says what was refused.
func (g *guard) authorize(cred *credential, req kmsg.Request) (ok bool, what string) {
	if cred.Role == RoleAdmin {
		return true, ""
	}
	topics := func(names ...string) (bool, string) {
		for _, n := range names {
			if !slices.Contains(cred.Topics, n) {
				return false, "topic " + n
			}
		}
		return true, ""
	}
	group := func(name string) (bool, string) {
		if cred.Role != RoleConsumer || cred.GroupPrefix == "" || !strings.HasPrefix(name, cred.GroupPrefix) {
			return false, "group " + name
		}
		return true, ""
	}
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest, *kmsg.MetadataRequest, *kmsg.GetTelemetrySubscriptionsRequest, *kmsg.PushTelemetryRequest:
		return true, ""
	case *kmsg.ProduceRequest:
		if cred.Role != RoleProducer {
			return false, "produce"
		}
		if r.TransactionID != nil {
			return false, "a transactional produce"
		}
		var names []string
		for _, t := range r.Topics {
			names = append(names, g.topicName(t.Topic, t.TopicID))
		}
		return topics(names...)
	case *kmsg.InitProducerIDRequest:
		// An idempotent producer's id; transactions are signalbox's own.
		return cred.Role == RoleProducer && r.TransactionalID == nil, "a transactional producer id"
	}
	if cred.Role != RoleConsumer {
		return false, kmsg.NameForKey(req.Key())
	}
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		var names []string
		for _, t := range r.Topics {
			names = append(names, g.topicName(t.Topic, t.TopicID))
		}
		return topics(names...)
	case *kmsg.ListOffsetsRequest:
		var names []string
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
		return topics(names...)
	case *kmsg.OffsetForLeaderEpochRequest:
		var names []string
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
		return topics(names...)
	case *kmsg.FindCoordinatorRequest:
		if r.CoordinatorType != 0 {
			return false, "a transaction coordinator"
		}
		keys := r.CoordinatorKeys
		if r.Version < 4 {
			keys = []string{r.CoordinatorKey}
		}
		for _, k := range keys {
			if ok, what := group(k); !ok {
				return ok, what
			}
		}
		return true, ""
	case *kmsg.JoinGroupRequest:
		return group(r.Group)
	case *kmsg.SyncGroupRequest:
		return group(r.Group)
	case *kmsg.HeartbeatRequest:
		return group(r.Group)
	case *kmsg.LeaveGroupRequest:
		return group(r.Group)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if ok, what := group(r.Group); !ok {
			return ok, what
		}
		return topics(r.SubscribedTopicNames...)
	case *kmsg.DescribeGroupsRequest:
		for _, gr := range r.Groups {
			if ok, what := group(gr); !ok {
				return ok, what
			}
		}
		return true, ""
	case *kmsg.OffsetCommitRequest:
		if ok, what := group(r.Group); !ok {
			return ok, what
		}
		var names []string
		for _, t := range r.Topics {
			names = append(names, g.topicName(t.Topic, t.TopicID))
		}
		return topics(names...)
	case *kmsg.OffsetFetchRequest:
		if r.Version >= 8 {
			for _, gr := range r.Groups {
				if ok, what := group(gr.Group); !ok {
					return ok, what
				}
			}
			return true, ""
		}
		return group(r.Group)
	}
	return false, kmsg.NameForKey(req.Key())
}

// topicName is a request's topic: its name, or the name of its id.
func (g *guard) topicName(name string, id [16]byte) string {
	if name != "" || id == ([16]byte{}) || g.topicByID == nil {
		return name
	}
	return g.topicByID(id)
}

// checkPlain checks a PLAIN password.
func (u *users) checkPlain(name, password string) bool {
	c, ok := u.get(name)
	sum := sha512.Sum512([]byte(password))
	return ok && subtle.ConstantTimeCompare(sum[:], c.plain[:]) == 1
}
