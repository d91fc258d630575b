package app

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/platform/obs"
)

// Who may use the embedded broker (broker's guard enforces it): clients
// on this host without a credential, unless -kafka-local-anonymous=false;
// clients from other hosts as one of these users:
//
//   - nf: produces to the NF topics, and nothing else. Its password is made
//     at first start and kept in the data directory (NFCredentialFile).
//   - site (with -site): everything, as the peer site's mirror and
//     take-over; its password is this site's API admin token, which the
//     peer holds as its -peer-token.
//   - -kafka-username (with -kafka-sasl-mechanism): everything; every
//     client then authenticates, as before.
//
// -kafka-allow-anonymous opens the broker to everyone, with a warning at
// every start and the kafka_open alarm while it runs so.

const (
	// NFCredentialFile holds the NF credential's password.
	NFCredentialFile = "kafka-nf-password"
	nfUser           = "nf"
	siteUser         = "site"
	alarmKafkaOpen   = "kafka_open"
)

// brokerAccess is who may use the embedded broker, from the settings.
func (s *Server) brokerAccess(topics []broker.TopicSpec) (users []broker.User, anon broker.Anonymous, err error) {
	cfg := s.cfg
	switch {
	case cfg.KafkaAllowAnonymous:
		anon = broker.AnonymousAll
		s.log.Warn("the embedded Kafka broker is open to every client, from any host, without a credential (-kafka-allow-anonymous): anyone who reaches its port can read the copies (subscriber data), produce into the NF topics and delete them",
			"kafka_addr", cfg.KafkaAddr)
		s.alarms.Raise(alarmKafkaOpen, "kafka", obs.Major,
			"the embedded Kafka broker accepts every client without a credential (-kafka-allow-anonymous): copies are open to whoever reaches "+cfg.KafkaAddr)
	case !cfg.KafkaLocalAnonymous:
		anon = broker.AnonymousNone
	}
	pw, err := nfPassword(cfg.DataDir, s.log)
	if err != nil {
		return nil, anon, err
	}
	nf := broker.User{Name: nfUser, Password: pw, Role: broker.RoleProducer}
	for _, t := range topics {
		nf.Topics = append(nf.Topics, t.Name)
	}
	users = append(users, nf)
	if cfg.Site != "" {
		users = append(users, broker.User{Name: siteUser, Password: s.token, Role: broker.RoleAdmin})
	}
	return users, anon, nil
}

// nfPassword is the NF credential's password: read from the data
// directory, or made and kept there at first start.
func nfPassword(dataDir string, log *slog.Logger) (string, error) {
	path := filepath.Join(dataDir, NFCredentialFile)
	pw, made, err := keptSecret(path, "", 24)
	if err != nil {
		return "", fmt.Errorf("nf credential: %w", err)
	}
	if made {
		log.Info("Kafka NF credential generated: NFs on other hosts produce as user nf with SASL SCRAM-SHA-512 and the password kept in the data dir (docs/director.md, \"NFs on other hosts\")",
			"user", nfUser, "path", path)
	} else {
		log.Info("Kafka NF credential read from the data dir: clients from other hosts produce as user nf (SASL SCRAM-SHA-512)", "path", path)
	}
	return pw, nil
}

// peerKafkaAuth is how this site's clients authenticate to the peer
// site's Kafka: as -kafka-username when a mechanism is set (both sites'
// brokers then know that user), else as the peer's site user, whose
// password is the peer's admin token (-peer-token).
func peerKafkaAuth(cfg config.Serve, cc *broker.ClientConfig) {
	if cfg.KafkaSASLMechanism != "" {
		return
	}
	cc.SASLMechanism, cc.Username, cc.Password = broker.MechScramSHA512, siteUser, cfg.PeerToken
}
