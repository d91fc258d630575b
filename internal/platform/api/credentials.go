package api

import (
	"context"
	"net/http"

	"github.com/signalbox/signalbox/internal/datadirector/director"
)

// KafkaCredentials issues the credentials with which the consumers of a
// kafka feed read its topic on the embedded broker from other hosts (the
// app; nil when the director's Kafka is not the embedded broker).
type KafkaCredentials interface {
	// Issue makes the feed's consumer credential, or a new password for
	// it: it may read the feed's topic with groups whose names begin
	// with GroupPrefix, and nothing else.
	Issue(ctx context.Context, spec *director.FeedSpec) (KafkaCredential, error)
	// Revoke removes the feed's consumer credential (false: it had none).
	Revoke(ctx context.Context, feed string) (bool, error)
}

// KafkaCredential is a consumer credential, as the API answers it once.
type KafkaCredential struct {
	User        string   `json:"user"`
	Password    string   `json:"password"`
	Mechanism   string   `json:"mechanism"`
	Topic       string   `json:"topic"`
	GroupPrefix string   `json:"group_prefix"`
	Brokers     []string `json:"brokers"`
}

const changedCredentials = "kafka_credentials"

// issueCredential makes (or renews) a kafka feed's consumer credential.
func (s *server) issueCredential(w http.ResponseWriter, r *http.Request) {
	if s.cfg.KafkaCredentials == nil {
		writeError(w, http.StatusServiceUnavailable, "the director's Kafka is not the embedded broker (or the director is off): its consumers authenticate as your Kafka cluster says", "")
		return
	}
	spec, err := s.getFeedSpec(r, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if spec.Topic == "" || spec.Kafka != nil || (spec.Type != "kafka" && spec.Type != "xdr") {
		writeError(w, http.StatusConflict, "feed "+spec.Name+" does not produce into a topic of the embedded broker: a consumer credential is for a kafka feed (or an xdr feed to a topic) without \"kafka\":{\"brokers\":...}", "")
		return
	}
	cred, err := s.cfg.KafkaCredentials.Issue(r.Context(), &spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.logChange(r, changedCredentials, "issue kafka consumer credential", spec.Name, "user", cred.User, "topic", cred.Topic)
	writeJSON(w, http.StatusCreated, cred)
}

// revokeCredential removes a feed's consumer credential.
func (s *server) revokeCredential(w http.ResponseWriter, r *http.Request) {
	if s.cfg.KafkaCredentials == nil {
		writeError(w, http.StatusServiceUnavailable, "the director's Kafka is not the embedded broker (or the director is off)", "")
		return
	}
	name := r.PathValue("name")
	had, err := s.cfg.KafkaCredentials.Revoke(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !had {
		s.fail(w, r, notFound("feed %q has no consumer credential", name))
		return
	}
	s.logChange(r, changedCredentials, "revoke kafka consumer credential", name)
	w.WriteHeader(http.StatusNoContent)
}
