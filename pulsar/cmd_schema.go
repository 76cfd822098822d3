// GET_SCHEMA, GET_OR_CREATE_SCHEMA (and the schema carried by PRODUCER and
// SUBSCRIBE).
//
// Behaviour:
//   - Schemas are stored per topic as an ordered list of versions in the
//     topic's "schemas" state record (metadata, CAS). A schema equal to a
//     stored version (type, data, properties) gets that version; any other
//     schema becomes a new version. Versions are 8-byte big-endian counters
//     starting at 0.
//   - No compatibility check is made unless Config.EnforceSchema is set;
//     then a schema whose type differs from the latest version's is refused
//     with IncompatibleSchema.
//   - GET_SCHEMA answers the requested version (or the latest); a topic
//     without schema answers error TopicNotFound, as Pulsar does.
//   - A partitioned topic's partitions share the schema record of the base
//     topic, as in Pulsar.
//
// Differences from the real broker:
//   - No schema compatibility strategies (BACKWARD, FORWARD, FULL...), no
//     schema deletion by version, no AUTO_PRODUCE validation.

package pulsar

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

func init() {
	register(pb.BaseCommand_GET_SCHEMA, handleGetSchema)
	register(pb.BaseCommand_GET_OR_CREATE_SCHEMA, handleGetOrCreateSchema)
}

// storedSchema is one schema version (JSON in the state record).
type storedSchema struct {
	Name       string            `json:"name"`
	Type       int32             `json:"type"`
	Data       []byte            `json:"data"`
	Properties map[string]string `json:"properties,omitempty"`
}

func schemaFromProto(sc *pb.Schema) storedSchema {
	st := storedSchema{Name: sc.GetName(), Type: int32(sc.GetType()), Data: sc.GetSchemaData(), Properties: map[string]string{}}
	for _, kv := range sc.GetProperties() {
		st.Properties[kv.GetKey()] = kv.GetValue()
	}
	return st
}

func (st storedSchema) toProto() *pb.Schema {
	sc := &pb.Schema{Name: proto.String(st.Name), Type: pb.Schema_Type(st.Type).Enum(), SchemaData: st.Data}
	if sc.SchemaData == nil {
		sc.SchemaData = []byte{}
	}
	for k, v := range st.Properties {
		sc.Properties = append(sc.Properties, &pb.KeyValue{Key: proto.String(k), Value: proto.String(v)})
	}
	return sc
}

func (st storedSchema) equal(o storedSchema) bool {
	return st.Type == o.Type && bytes.Equal(st.Data, o.Data) && maps.Equal(st.Properties, o.Properties)
}

func schemaVersionBytes(v int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// schemaTopic is the name schemas are stored under (the base topic).
func schemaTopic(n managedledger.TopicName) managedledger.TopicName { return n.Base() }

func loadSchemas(ctx context.Context, s *Server, n managedledger.TopicName) ([]storedSchema, metadata.Version, error) {
	raw, ver, ok, err := s.ml.GetState(ctx, schemaTopic(n), "schemas")
	if err != nil || !ok {
		return nil, metadata.NotExists, err
	}
	var list []storedSchema
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, 0, fmt.Errorf("%w: schemas of %s: %v", managedledger.ErrCorruptRecord, n, err)
	}
	return list, ver, nil
}

// getOrCreateSchema returns the version of sc for the topic, storing it as
// a new version if needed.
func (t *topic) getOrCreateSchema(ctx context.Context, sc *pb.Schema) ([]byte, error) {
	return getOrCreateSchema(ctx, t.s, t.name, sc)
}

func getOrCreateSchema(ctx context.Context, s *Server, n managedledger.TopicName, sc *pb.Schema) ([]byte, error) {
	want := schemaFromProto(sc)
	for attempt := 0; attempt < 16; attempt++ {
		list, ver, err := loadSchemas(ctx, s, n)
		if err != nil {
			return nil, err
		}
		for i, st := range list {
			if st.equal(want) {
				return schemaVersionBytes(i), nil
			}
		}
		if s.cfg.EnforceSchema && len(list) > 0 && list[len(list)-1].Type != want.Type {
			return nil, newError(pb.ServerError_IncompatibleSchema, fmt.Sprintf("schema type %v is incompatible with the topic's %v",
				pb.Schema_Type(want.Type), pb.Schema_Type(list[len(list)-1].Type)))
		}
		raw, err := json.Marshal(append(list, want))
		if err != nil {
			return nil, err
		}
		_, err = s.ml.PutState(ctx, schemaTopic(n), "schemas", raw, ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return schemaVersionBytes(len(list)), nil
		case metadata.Conflict, metadata.Unknown:
			continue // re-read: the new list may already contain it
		default:
			return nil, err
		}
	}
	return nil, managedledger.ErrTooManyConflicts
}

// checkConsumerSchema enforces the consumer's schema type when asked.
func checkConsumerSchema(ctx context.Context, s *Server, n managedledger.TopicName, sc *pb.Schema) error {
	if sc == nil {
		return nil
	}
	if !s.cfg.EnforceSchema {
		_, err := getOrCreateSchema(ctx, s, n, sc)
		return err
	}
	list, _, err := loadSchemas(ctx, s, n)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		_, err := getOrCreateSchema(ctx, s, n, sc)
		return err
	}
	if latest := list[len(list)-1]; latest.Type != int32(sc.GetType()) {
		return newError(pb.ServerError_IncompatibleSchema, "consumer schema type differs from the topic's")
	}
	return nil
}

func handleGetSchema(c *conn, f wire.Frame) error {
	g := f.Cmd.GetGetSchema()
	reqID, topic, version := g.GetRequestId(), g.GetTopic(), g.GetSchemaVersion()
	c.async(func(ctx context.Context) {
		resp := &pb.CommandGetSchemaResponse{RequestId: proto.Uint64(reqID)}
		st, v, err := getSchema(ctx, c.s, topic, version)
		if err != nil {
			code, msg := toServerError(err)
			resp.ErrorCode, resp.ErrorMessage = code.Enum(), proto.String(msg)
		} else {
			resp.Schema, resp.SchemaVersion = st.toProto(), schemaVersionBytes(v)
		}
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA_RESPONSE.Enum(), GetSchemaResponse: resp})
	})
	return nil
}

func getSchema(ctx context.Context, s *Server, topic string, version []byte) (storedSchema, int, error) {
	n, err := managedledger.ParseTopicName(topic)
	if err != nil {
		return storedSchema{}, 0, err
	}
	list, _, err := loadSchemas(ctx, s, n)
	if err != nil {
		return storedSchema{}, 0, err
	}
	if len(list) == 0 {
		return storedSchema{}, 0, newError(pb.ServerError_TopicNotFound, "topic has no schema")
	}
	v := len(list) - 1
	if len(version) == 8 {
		v = int(binary.BigEndian.Uint64(version))
	}
	if v < 0 || v >= len(list) {
		return storedSchema{}, 0, newError(pb.ServerError_TopicNotFound, fmt.Sprintf("no schema version %d", v))
	}
	return list[v], v, nil
}

func handleGetOrCreateSchema(c *conn, f wire.Frame) error {
	g := f.Cmd.GetGetOrCreateSchema()
	reqID, topic, sc := g.GetRequestId(), g.GetTopic(), g.GetSchema()
	c.async(func(ctx context.Context) {
		resp := &pb.CommandGetOrCreateSchemaResponse{RequestId: proto.Uint64(reqID)}
		n, err := managedledger.ParseTopicName(topic)
		var v []byte
		if err == nil {
			v, err = getOrCreateSchema(ctx, c.s, n, sc)
		}
		if err != nil {
			code, msg := toServerError(err)
			resp.ErrorCode, resp.ErrorMessage = code.Enum(), proto.String(msg)
		} else {
			resp.SchemaVersion = v
		}
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE.Enum(), GetOrCreateSchemaResponse: resp})
	})
	return nil
}
