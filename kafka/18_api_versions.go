package kafka

// ApiVersions: v0-4
//
// Behavior:
//   - The answer is built from the registry that every API file fills in
//     init() with regKey; the same registry gates every request before its
//     body is decoded, so what is advertised is exactly what is served.
//   - KIP-511: a request at a version above our maximum is not decoded; it
//     is answered at v0 with UNSUPPORTED_VERSION and the full key table, so
//     the client retries at a version we know.
//   - The response header is always v0 (no tagged-field byte), even for the
//     flexible v3+ bodies, so clients of any age can parse it.
//   - v3+ ClientSoftwareName/Version are validated like Kafka does
//     ([a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?); others get INVALID_REQUEST.
//   - No SupportedFeatures/FinalizedFeatures are sent: advertising
//     transaction.version or group.version would switch clients onto
//     KIP-890 / KIP-848 paths that are not implemented.
//
// Version notes:
//   - v1: throttle_time_ms.
//   - v2: same as v1.
//   - v3: flexible; client software name/version (KIP-511).
//   - v4: same as v3 (KIP-896 baseline marker).

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(18, 0, 4, handleApiVersions) }

// handler runs a request's synchronous part in connection order. It returns
// an immediate response, or a function producing the response later (run on
// its own goroutine), or neither (the request has no response). A non-nil
// error closes the connection.
type handler func(r *request) (kmsg.Response, func() kmsg.Response, error)

type api struct {
	key, min, max int16
	handle        handler
}

var apis = map[int16]*api{}

// regKey registers an API key's supported version range and handler. It
// panics on an invalid range or a duplicate key: the table is built at init
// and a mistake there must not reach a client.
func regKey(key, min, max int16, h handler) {
	if min < 0 || max < min || h == nil {
		panic(fmt.Sprintf("kafka: invalid registration of key %d: %d-%d", key, min, max))
	}
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("kafka: api key %d registered twice", key))
	}
	if req := kmsg.RequestForKey(key); req == nil || req.MaxVersion() < max {
		panic(fmt.Sprintf("kafka: codec cannot serve api key %d up to v%d", key, max))
	}
	apis[key] = &api{key: key, min: min, max: max, handle: h}
}

func lookupAPI(key int16) *api { return apis[key] }

// SupportedVersions returns the advertised range per API key.
func SupportedVersions() map[int16][2]int16 {
	out := make(map[int16][2]int16, len(apis))
	for k, a := range apis {
		out[k] = [2]int16{a.min, a.max}
	}
	return out
}

func apiKeyTable() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]int, 0, len(apis))
	for k := range apis {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, k := range keys {
		a := apis[int16(k)]
		e := kmsg.NewApiVersionsResponseApiKey()
		e.ApiKey, e.MinVersion, e.MaxVersion = a.key, a.min, a.max
		out = append(out, e)
	}
	return out
}

// apiVersionsFallback is the KIP-511 answer to an unknown ApiVersions
// version: a v0 body with UNSUPPORTED_VERSION and our table.
func apiVersionsFallback() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeyTable()
	return resp
}

var softwareRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareRE.MatchString(req.ClientSoftwareName) || !softwareRE.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ApiKeys = apiKeyTable()
		return resp, nil, nil
	}
	resp.ApiKeys = apiKeyTable()
	return resp, nil, nil
}
