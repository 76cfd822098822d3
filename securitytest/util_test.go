package securitytest

import (
	"io"
	"strconv"

	"github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func quietPulsarLog() log.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return log.NewLoggerWithLogrus(l)
}
