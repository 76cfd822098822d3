// CONNECT, PING, PONG, AUTH_RESPONSE: protocol v0-v21.
//
// Behaviour:
//   - CONNECT answers CONNECTED{server_version, protocol_version =
//     min(client, 21), max_message_size, feature_flags{
//     supports_broker_entry_metadata}}. With authentication on (auth.go)
//     the credentials must authenticate ("token", "tls", or the anonymous
//     role), else ERROR AuthenticationError "Unable to authenticate" and
//     the connection closes.
//   - A client that sets feature_flags.supports_broker_entry_metadata gets
//     the 0x0e02 broker-entry-metadata prefix (broker timestamp and message
//     index) on every MESSAGE; others get it stripped.
//   - PING is answered with PONG at once; the broker pings idle clients and
//     closes connections silent for twice the keep-alive interval.
//
// Differences from the real broker:
//   - AUTH_CHALLENGE is sent when a session's token expired and the client
//     supports refresh; AUTH_RESPONSE must re-authenticate the same role.
//   - A second CONNECT on the same connection is a protocol error and closes
//     it (Pulsar does the same).
//   - supports_topic_watchers is not advertised (WATCH_TOPIC_LIST is not
//     served), so Java clients poll GET_TOPICS_OF_NAMESPACE.

package pulsar

import (
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// maxProtocolVersion is the highest protocol version this broker speaks.
const maxProtocolVersion = 21

func init() {
	registerPreConnect(pb.BaseCommand_CONNECT, handleConnect)
	registerPreConnect(pb.BaseCommand_PING, handlePing)
	registerPreConnect(pb.BaseCommand_PONG, func(*conn, wire.Frame) error { return nil })
	register(pb.BaseCommand_AUTH_RESPONSE, handleAuthResponse)
}

func handleConnect(c *conn, f wire.Frame) error {
	if c.connected {
		return errors.New("second CONNECT on a connection")
	}
	cc := f.Cmd.GetConnect()
	if cc == nil {
		return errors.New("CONNECT without body")
	}
	id, err := c.s.authenticate(cc.GetAuthMethodName(), cc.GetAuthData(), c.nc)
	if err != nil {
		// Pulsar answers ERROR(-1, AuthenticationError) and closes. Written
		// here, not queued, so it reaches the client before the close.
		c.log.Info("pulsar authentication failed", "method", cc.GetAuthMethodName(), "err", err)
		if b, encErr := wire.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_ERROR.Enum(), Error: &pb.CommandError{
			RequestId: proto.Uint64(^uint64(0)), Error: pb.ServerError_AuthenticationError.Enum(), Message: proto.String(errUnableToAuthenticate)}}); encErr == nil {
			_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.nc.Write(b)
		}
		return errors.New("authentication failed")
	}
	c.authMu.Lock()
	c.id, c.supportsRefresh = id, cc.GetFeatureFlags().GetSupportsAuthRefresh()
	c.authMu.Unlock()
	c.protocolVersion = min(cc.GetProtocolVersion(), maxProtocolVersion)
	c.brokerEntryMeta = cc.GetFeatureFlags().GetSupportsBrokerEntryMetadata()
	c.clientVersion = cc.GetClientVersion()
	c.connected = true
	c.log = c.log.With("client", c.clientVersion)
	if id.role != "" {
		c.log = c.log.With("role", id.role)
	}
	c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{
		ServerVersion:   proto.String(ServerVersion),
		ProtocolVersion: proto.Int32(c.protocolVersion),
		MaxMessageSize:  proto.Int32(int32(c.s.cfg.MaxMessageSize)),
		FeatureFlags: &pb.FeatureFlags{
			SupportsBrokerEntryMetadata: proto.Bool(true),
		},
	}})
	return nil
}

func handlePing(c *conn, _ wire.Frame) error {
	c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
	return nil
}
