package envd

import (
	"errors"
	"io/fs"
	"syscall"

	"connectrpc.com/connect"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// connectCodes maps the agent's typed error codes onto Connect's, in one table.
var connectCodes = map[string]connect.Code{
	agentapi.CodeInvalidRequest:   connect.CodeInvalidArgument,
	agentapi.CodeInvalidPath:      connect.CodeInvalidArgument,
	agentapi.CodeNotFound:         connect.CodeNotFound,
	agentapi.CodeFileNotFound:     connect.CodeNotFound,
	agentapi.CodePermissionDenied: connect.CodePermissionDenied,
	agentapi.CodeConflict:         connect.CodeFailedPrecondition,
	agentapi.CodePreconditionFail: connect.CodeFailedPrecondition,
	agentapi.CodeTooLarge:         connect.CodeResourceExhausted,
	agentapi.CodeNoSpace:          connect.CodeResourceExhausted,
	agentapi.CodeTimeout:          connect.CodeDeadlineExceeded,
	agentapi.CodeUnavailable:      connect.CodeUnavailable,
	agentapi.CodeNotSupported:     connect.CodeUnimplemented,
}

// asConnect turns an error of the agent's pieces into a Connect error with the code E2B's SDK maps to its classes.
func asConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var ae *agentapi.Error
	if errors.As(err, &ae) {
		if c, ok := connectCodes[ae.Code]; ok {
			return connect.NewError(c, errors.New(ae.Message))
		}
		return connect.NewError(connect.CodeInternal, errors.New(ae.Message))
	}
	return connect.NewError(fsCode(err), err)
}

// fsCode is the Connect code of a file-system error.
func fsCode(err error) connect.Code {
	switch {
	case errors.Is(err, errOutside), errors.Is(err, fs.ErrPermission):
		return connect.CodePermissionDenied
	case errors.Is(err, fs.ErrNotExist):
		return connect.CodeNotFound
	case errors.Is(err, fs.ErrExist):
		return connect.CodeAlreadyExists
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return connect.CodeResourceExhausted
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY),
		errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG):
		return connect.CodeInvalidArgument
	}
	var pe *pathError
	if errors.As(err, &pe) {
		return connect.CodeInvalidArgument
	}
	return connect.CodeInternal
}

func invalidArg(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, errorf(format, args...))
}
