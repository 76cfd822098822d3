package pulsar

import "net/http"

func newHTTPHandler(s *Server) http.Handler { return http.NotFoundHandler() }
