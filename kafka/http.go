package kafka

// HTTP management paths of the Kafka front end, mounted on the admin port
// under /v1/kafka/ (and behind the admin API's authentication):
//
//	GET    /v1/kafka/scram-users                       users with SCRAM credentials
//	PUT    /v1/kafka/scram-users/{user}                {"mechanism","password","iterations"}
//	DELETE /v1/kafka/scram-users/{user}[?mechanism=M]  one mechanism, or all
//
// They exist so the first SCRAM user can be created before any Kafka
// client can authenticate (`nereus kafka user set`); afterwards Kafka's
// own AlterUserScramCredentials (kafka-configs) does the same.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/kafka/kauth"
	"github.com/nereusstream/nereus-go/kafka/ksasl"
)

// HTTPPatterns are the admin-mux patterns HTTPHandler serves.
var HTTPPatterns = []string{"/v1/kafka/"}

// HTTPHandler serves the Kafka management paths.
func (s *Server) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/kafka/scram-users", s.httpListScram)
	mux.HandleFunc("PUT /v1/kafka/scram-users/{user}", s.httpSetScram)
	mux.HandleFunc("DELETE /v1/kafka/scram-users/{user}", s.httpDeleteScram)
	return mux
}

func httpJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func httpErr(w http.ResponseWriter, code adminapi.Code, msg string) {
	httpJSON(w, code.Status(), adminapi.ErrorBody{Error: msg, Code: code})
}

func (s *Server) httpListScram(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	creds, err := s.auth.DescribeScram(ctx, nil)
	if err != nil {
		httpErr(w, adminapi.CodeUnavailable, err.Error())
		return
	}
	out := []adminapi.KafkaScramUser{}
	for u, infos := range creds {
		ku := adminapi.KafkaScramUser{User: u}
		for _, in := range infos {
			ku.Credentials = append(ku.Credentials, adminapi.KafkaScramCredentialInfo{Mechanism: in.Mechanism, Iterations: in.Iterations})
		}
		out = append(out, ku)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	httpJSON(w, http.StatusOK, out)
}

func (s *Server) httpSetScram(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	var req adminapi.SetKafkaScramRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		httpErr(w, adminapi.CodeInvalidArgument, "body: want {\"mechanism\",\"password\",\"iterations\"}")
		return
	}
	if req.Mechanism == "" {
		req.Mechanism = ksasl.ScramSHA256
	}
	if req.Iterations == 0 {
		req.Iterations = 8192
	}
	if !kauth.ValidUser(user) || req.Password == "" || ksasl.ScramType(req.Mechanism) == 0 {
		httpErr(w, adminapi.CodeInvalidArgument, "need a user name, a password and a mechanism SCRAM-SHA-256 or SCRAM-SHA-512")
		return
	}
	cred, err := ksasl.NewScramCredentialFromPassword(req.Mechanism, req.Password, req.Iterations)
	req.Password = ""
	if err != nil {
		httpErr(w, adminapi.CodeInvalidArgument, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := s.auth.UpsertScram(ctx, user, cred); err != nil {
		httpErr(w, adminapi.CodeUnavailable, err.Error())
		return
	}
	s.log.Info("kafka: SCRAM credential set through the admin API", "user", user, "mechanism", req.Mechanism)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) httpDeleteScram(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	mechs := ksasl.ScramMechanisms
	if m := r.URL.Query().Get("mechanism"); m != "" {
		if ksasl.ScramType(m) == 0 {
			httpErr(w, adminapi.CodeInvalidArgument, "mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512")
			return
		}
		mechs = []string{m}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	found := false
	for _, m := range mechs {
		ok, err := s.auth.DeleteScram(ctx, user, m)
		if err != nil {
			httpErr(w, adminapi.CodeUnavailable, err.Error())
			return
		}
		found = found || ok
	}
	if !found {
		httpErr(w, adminapi.CodeNotFound, errors.New("no such SCRAM credential").Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
