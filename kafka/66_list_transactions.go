package kafka

// ListTransactions: v0-2
//
// Behavior:
//   - Lists the transactional ids this broker coordinates (here: every id
//     with a record, all loaded at start), filtered by state names
//     (unknown names are echoed in unknown_state_filters and match
//     nothing), by producer ids, by duration (v1+: only transactions
//     running longer than duration_filter_ms, i.e. Ongoing/Prepare* with an
//     older start time) and by transactional id pattern (v2+: a regular
//     expression in Go's RE2 syntax, which covers the usual Java patterns;
//     an invalid pattern is INVALID_REQUEST).
//
// Version notes:
//   - v1: duration_filter_ms. v2: transactional_id_pattern.

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/ktxn"
)

func init() { regKey(66, 0, 2, handleListTransactions) }

var txnStateNames = map[string]bool{
	string(ktxn.Empty): true, string(ktxn.Ongoing): true, string(ktxn.PrepareCommit): true,
	string(ktxn.PrepareAbort): true, string(ktxn.CompleteCommit): true, string(ktxn.CompleteAbort): true,
	"Dead": true, "PrepareEpochFence": true,
}

func handleListTransactions(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[string]bool{}
	for _, sname := range req.StateFilters {
		if !txnStateNames[sname] {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, sname)
			continue
		}
		states[sname] = true
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	var re *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil, nil
		}
	}
	now := r.s.cfg.Now().UnixMilli()
	for _, rec := range r.s.txns.List() {
		if (len(req.StateFilters) > 0 && !states[string(rec.State)]) ||
			(len(pids) > 0 && !pids[rec.ProducerID]) ||
			(re != nil && !re.MatchString(rec.TxnID)) {
			continue
		}
		if req.Version >= 1 && req.DurationFilterMillis >= 0 {
			running := rec.State == ktxn.Ongoing || rec.State.Preparing()
			if !running || now-rec.StartMs <= req.DurationFilterMillis {
				continue
			}
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = rec.TxnID, rec.ProducerID, string(rec.State)
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil, nil
}
