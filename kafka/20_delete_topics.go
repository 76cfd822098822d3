package kafka

// DeleteTopics: v0-6
//
// Behavior:
//   - Marks the topic deleting (it disappears from Metadata at once),
//     deletes its partition streams (only those labelled with its topic id)
//     and then its record. Committed group offsets are left in place but
//     are never returned for a later topic of the same name (they carry the
//     old topic id).
//   - v6 names topics by name or by id; unknown ids get UNKNOWN_TOPIC_ID.
//   - timeout_ms is ignored: deletion is done when the response is sent.
//   - The internal topics (__consumer_offsets, __transaction_state) get
//     INVALID_TOPIC_EXCEPTION.
//
// Version notes:
//   - v1: throttle. v2-3: same. v4: flexible. v5: error message.
//   - v6: topics by name or id.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{t.Topic, t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: &n})
		}
	}
	for _, t := range targets {
		ot := kmsg.NewDeleteTopicsResponseTopic()
		ot.Topic, ot.TopicID = t.name, t.id
		name := ""
		if t.name != nil {
			name = *t.name
		} else {
			topic, err := r.s.store.TopicByID(r.ctx, kstore.TopicID(t.id))
			if err != nil {
				ot.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, ot)
				continue
			}
			name = topic.Name
			ot.Topic = &topic.Name
		}
		if isInternalTopic(name) {
			ot.ErrorCode = kerr.InvalidTopicException.Code
			if req.Version >= 5 {
				ot.ErrorMessage = errorMessage(fmt.Errorf("%w %s cannot be deleted", errInternalTopic, name))
			}
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		id, err := r.s.store.DeleteTopic(r.ctx, name)
		if err != nil {
			ot.ErrorCode = errorCode(err)
			if req.Version >= 5 {
				ot.ErrorMessage = errorMessage(err)
			}
		} else {
			ot.TopicID = id
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil, nil
}
