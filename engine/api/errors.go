package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Error codes, HTTP-like, in error replies (see the package doc).
const (
	CodeBadRequest     = 400
	CodeNotFound       = 404
	CodeConflict       = 409 // fenced: a queue not held at that epoch; a group that has members
	CodeTooManyReplays = 429
	CodeTooMany        = 429 // too many members or groups
	CodeInternal       = 500
	CodeNotImplemented = 501
	CodeUnavailable    = 503
)

// Error is an error reply, as JSON:
//
//	{"error":{"code":404,"description":"reader: unknown topic or queue: orders/9"}}
//
// (the shape of the engine's ingress error replies). Client methods return it as the error.
type Error struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// Error returns the code and the description.
func (e *Error) Error() string {
	return fmt.Sprintf("rocketstore API error %d: %s", e.Code, e.Description)
}

// ErrorReply is an error reply on the wire.
type ErrorReply struct {
	Error *Error `json:"error"`
}

// CodeOf is the code of the *Error in err's chain, 0 when there is none.
func CodeOf(err error) int {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return 0
}

// decodeReply decodes a reply into out, or returns the error it carries: an *Error for an error
// reply (from its JSON, or from micro's error headers when the body is not ours).
func decodeReply(m *nats.Msg, out any) error {
	var er ErrorReply
	if json.Unmarshal(m.Data, &er) == nil && er.Error != nil {
		return er.Error
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		n, err := strconv.Atoi(code)
		if err != nil {
			n = CodeInternal
		}
		return &Error{Code: n, Description: m.Header.Get("Nats-Service-Error")}
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return fmt.Errorf("api: malformed reply on %s: %w", m.Subject, err)
	}
	return nil
}
