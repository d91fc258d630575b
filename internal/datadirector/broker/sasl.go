package broker

import (
	"bytes"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refuseBadCredentials answers a failed SASL authentication the way Kafka
// does (SASL_AUTHENTICATION_FAILED with a message) where it can tell in
// advance: kfake itself just drops the connection, which clients report as
// a bare EOF. PLAIN carries the password, so every failure is caught; SCRAM
// failures are caught for unknown users only (a wrong SCRAM password still
// ends in a dropped connection, as the proof check is kfake's).
func refuseBadCredentials(c *kfake.Cluster, sc *SASLConfig) {
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req, ok := r.(*kmsg.SASLAuthenticateRequest)
		if !ok {
			return nil, nil, false
		}
		var user, pass string
		checkPass := false
		msg := req.SASLAuthBytes
		switch sc.Mechanism {
		case MechPlain:
			parts := bytes.Split(msg, []byte{0})
			if len(parts) != 3 {
				return nil, nil, false
			}
			user, pass, checkPass = string(parts[1]), string(parts[2]), true
		default:
			// SCRAM client-first: gs2 header, then n=<user>,r=<nonce>.
			s := string(msg)
			if !strings.HasPrefix(s, "n,") && !strings.HasPrefix(s, "y,") {
				return nil, nil, false
			}
			for _, kv := range strings.Split(s, ",") {
				if u, ok := strings.CutPrefix(kv, "n="); ok {
					user = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(u)
				}
			}
		}
		want, known := sc.Users[user]
		if known && (!checkPass || want == pass) {
			return nil, nil, false
		}
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		m := "Authentication failed: invalid username or password"
		resp.ErrorMessage = &m
		return resp, nil, true
	})
}
