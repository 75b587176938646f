package resp_test

import (
	"strings"
	"testing"

	"github.com/ratchet/ratchet/resp"
)

// limitRequest is a typical RL.LIMIT request as clients send it.
const limitRequest = "*4\r\n$8\r\nRL.LIMIT\r\n$16\r\nkey:000000012345\r\n$13\r\n1000000000000\r\n$5\r\n60000\r\n"

func BenchmarkParseLimit(b *testing.B) {
	in := []byte(limitRequest)
	dst := make([][]byte, 0, 8)
	lim := resp.DefaultLimits()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		args, n, err := resp.Parse(in, dst, lim)
		if err != nil || n != len(in) || len(args) != 4 {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkParsePipeline parses a buffer of 16 pipelined requests, as one read of a
// pipelining client delivers them; one op is the whole buffer.
func BenchmarkParsePipeline(b *testing.B) {
	in := []byte(strings.Repeat(limitRequest, 16))
	dst := make([][]byte, 0, 8)
	lim := resp.DefaultLimits()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		buf := in
		for range 16 {
			args, n, err := resp.Parse(buf, dst, lim)
			if err != nil || n == 0 || len(args) != 4 {
				b.Fatal(n, err)
			}
			dst = args
			buf = buf[n:]
		}
		if len(buf) != 0 {
			b.Fatal("left", len(buf))
		}
	}
}

func BenchmarkParseInline(b *testing.B) {
	in := []byte("RL.LIMIT key:000000012345 1000000000000 60000\r\n")
	dst := make([][]byte, 0, 8)
	lim := resp.DefaultLimits()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		args, n, err := resp.Parse(in, dst, lim)
		if err != nil || n != len(in) || len(args) != 4 {
			b.Fatal(n, err)
		}
	}
}

// writeDecision writes RL.LIMIT's reply with realistic values.
func writeDecision(w *resp.Writer) {
	w.Array(5)
	w.Int(1)
	w.Int(1000000000000)
	w.Int(999999987654)
	w.Int(0)
	w.Int(42137)
}

func BenchmarkWriteLimitResp2(b *testing.B) {
	var w resp.Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		writeDecision(&w)
	}
}

func BenchmarkWriteLimitResp3(b *testing.B) {
	var w resp.Writer
	w.SetProto(3)
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		writeDecision(&w)
	}
}

func BenchmarkWriteError(b *testing.B) {
	var w resp.Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		w.Error("ERR limit must be an integer from 1 to 1125899906842624")
	}
}

func BenchmarkWriteBulk(b *testing.B) {
	var w resp.Writer
	v := []byte("key:000000012345")
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		w.Bulk(v)
	}
}

// writeStatus writes RL.STATUS's reply with LIMIT, as commands.cmdStatus does.
func writeStatus(w *resp.Writer) {
	w.Map(13)
	field := func(name string, v int64) {
		w.BulkString(name)
		w.Int(v)
	}
	field("sequence", 29143422)
	field("window_ms", 60000)
	field("current_regional", 12345)
	field("current_imported", 678)
	field("previous_regional", 54321)
	field("previous_imported", 0)
	field("used", 40000)
	w.BulkString("source")
	w.BulkString("origin")
	field("fresh", 1)
	field("strict_ms", 0)
	field("limit", 1000000000000)
	field("remaining", 999999960000)
	field("reset_after_ms", 42137)
}

func BenchmarkWriteStatusResp2(b *testing.B) {
	var w resp.Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		writeStatus(&w)
	}
}

func BenchmarkWriteStatusResp3(b *testing.B) {
	var w resp.Writer
	w.SetProto(3)
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		writeStatus(&w)
	}
}
