package kafka

// AlterUserScramCredentials: v0
//
// Behavior:
//   - Upsertions carry the salt and the client-side salted password
//     (Kafka's admin client salts; the password never travels); the broker
//     derives and stores only the stored key and server key (kafka/ksasl,
//     kafka/kauth). Deletions remove one mechanism of one user.
//   - Kafka's per-user validation, all-or-nothing per user: an empty name
//     or fewer than 4096 / more than 16384 iterations is
//     UNACCEPTABLE_CREDENTIAL, an unknown mechanism
//     UNSUPPORTED_SASL_MECHANISM, the same user and mechanism twice
//     DUPLICATE_RESOURCE, deleting a missing credential RESOURCE_NOT_FOUND.
//   - kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]'
//     --entity-type users works through this API.
//
// Version notes:
//   - v0: the only version (KIP-554), flexible.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kauth"
	"github.com/nereusstream/nereus-go/kafka/ksasl"
)

func init() { regKey(51, 0, 0, handleAlterUserSCRAMCredentials) }

type scramOp struct {
	del  bool
	mech string
	cred ksasl.ScramCredential
}

func handleAlterUserSCRAMCredentials(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type userOps struct {
		ops  []scramOp
		code int16
		msg  string
		seen map[string]bool
	}
	users := map[string]*userOps{}
	var order []string
	get := func(name string) *userOps {
		u, ok := users[name]
		if !ok {
			u = &userOps{seen: map[string]bool{}}
			users[name] = u
			order = append(order, name)
		}
		return u
	}
	reject := func(u *userOps, code int16, msg string) {
		if u.code == 0 {
			u.code, u.msg = code, msg
		}
	}
	check := func(name string, mechType int8) (*userOps, string, bool) {
		u := get(name)
		mech := ksasl.ScramName(mechType)
		switch {
		case !kauth.ValidUser(name):
			reject(u, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case mech == "":
			reject(u, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case u.seen[mech]:
			reject(u, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		default:
			u.seen[mech] = true
			return u, mech, true
		}
		return u, mech, false
	}
	for _, d := range req.Deletions {
		if u, mech, ok := check(d.Name, d.Mechanism); ok {
			u.ops = append(u.ops, scramOp{del: true, mech: mech})
		}
	}
	for _, up := range req.Upsertions {
		u, mech, ok := check(up.Name, up.Mechanism)
		if !ok {
			continue
		}
		switch {
		case up.Iterations < ksasl.MinIterations:
			reject(u, kerr.UnacceptableCredential.Code, fmt.Sprintf("Too few iterations (minimum %d)", ksasl.MinIterations))
			continue
		case up.Iterations > ksasl.MaxIterations:
			reject(u, kerr.UnacceptableCredential.Code, fmt.Sprintf("Too many iterations (maximum %d)", ksasl.MaxIterations))
			continue
		}
		cred, err := ksasl.NewScramCredential(mech, up.SaltedPassword, up.Salt, int(up.Iterations))
		if err != nil {
			reject(u, kerr.UnacceptableCredential.Code, err.Error())
			continue
		}
		u.ops = append(u.ops, scramOp{mech: mech, cred: cred})
	}
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		defer cancel()
		for _, name := range order {
			u := users[name]
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User = name
			if u.code == 0 {
				u.code, u.msg = applyScramOps(ctx, r.s.auth, name, u.ops)
			}
			if u.code != 0 {
				res.ErrorCode, res.ErrorMessage = u.code, strPtr(u.msg)
			} else {
				r.s.log.Info("kafka: SCRAM credentials altered", "user", name, "by", r.principal())
			}
			resp.Results = append(resp.Results, res)
		}
		return resp
	}, nil
}

// applyScramOps checks every deletion first (a missing credential fails
// the user's whole set), then applies them.
func applyScramOps(ctx context.Context, st *kauth.Store, user string, ops []scramOp) (int16, string) {
	for _, op := range ops {
		if !op.del {
			continue
		}
		if _, ok, err := st.ScramCredential(ctx, user, op.mech); err != nil {
			return errorCode(err), err.Error()
		} else if !ok {
			return kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist"
		}
	}
	for _, op := range ops {
		var err error
		if op.del {
			_, err = st.DeleteScram(ctx, user, op.mech)
		} else {
			err = st.UpsertScram(ctx, user, op.cred)
		}
		if err != nil {
			return errorCode(err), err.Error()
		}
	}
	return 0, ""
}
