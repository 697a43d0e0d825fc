//go:build !windows

package takeover

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// The few messages of the old process's replies the new process reads,
// parsed by hand: the console's RowDescription and DataRow of SHOW FDS
// (and a row's fd and link columns), and an ErrorResponse's message. Each reads only within the body it is
// given, whatever the old process sent (FuzzTakeoverRows).

// errorMessage is an ErrorResponse's message field.
func errorMessage(body []byte) string {
	for len(body) > 1 {
		code := body[0]
		end := 1
		for end < len(body) && body[end] != 0 {
			end++
		}
		if code == 'M' {
			return string(body[1:end])
		}
		body = body[min(end+1, len(body)):]
	}
	return "error from the old process"
}

// rowDescriptionNames are a RowDescription's column names.
func rowDescriptionNames(body []byte) []string {
	if len(body) < 2 {
		return nil
	}
	n := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	names := make([]string, 0, n)
	for range n {
		end := 0
		for end < len(body) && body[end] != 0 {
			end++
		}
		names = append(names, string(body[:end]))
		if end+1+18 > len(body) {
			break
		}
		body = body[end+1+18:]
	}
	return names
}

// rowValues maps a DataRow's text values to their columns' names.
func rowValues(names []string, body []byte) map[string]string {
	out := map[string]string{}
	if len(body) < 2 {
		return out
	}
	n := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	for i := 0; i < n && len(body) >= 4; i++ {
		l := int(int32(binary.BigEndian.Uint32(body)))
		body = body[4:]
		if l < 0 || l > len(body) {
			continue // NULL
		}
		if i < len(names) {
			out[names[i]] = string(body[:l])
		}
		body = body[l:]
	}
	return out
}

// rowLink reads a row's fd and link columns: its descriptor in the old
// process, and the linked row's (0: none; a listener has none).
func rowLink(task string, row map[string]string) (oldFD, link int, err error) {
	oldFD, err = strconv.Atoi(row["fd"])
	if err != nil || oldFD < 0 {
		return 0, 0, fmt.Errorf("fd %q is not a descriptor", row["fd"])
	}
	if v, ok := row["link"]; ok {
		link, err = strconv.Atoi(v)
		if err != nil || link < 0 {
			return 0, 0, fmt.Errorf("link %q is not a descriptor", v)
		}
	}
	if link != 0 && task == "pooler" {
		return 0, 0, errors.New("a listener linked to another row")
	}
	return oldFD, link, nil
}
