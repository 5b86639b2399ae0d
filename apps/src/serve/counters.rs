//! What each engine reports as its connections end ([`ServeApp`]): the `app` counters of
//! weir-serve's summary and `--stats-json`, in one place.

use serde_json::json;
use stack::flow::FlowKey;

use super::discard::{self, Discard};
use super::echo::Echo;
use super::glue::{ConnEnd, ServeApp, Tally};
use super::http::{self, Http};
use super::iperf3::{self, Iperf3};
use super::sockperf::{self, Sockperf};
use super::tbench::Tbench;
use crate::report::DigestRecord;

impl ServeApp for Echo {
    fn tally(&mut self, _server: &mut (), t: &mut Tally, _end: &ConnEnd) {
        t.add("echoed_bytes", self.echoed());
    }
}

impl ServeApp for Sockperf {
    fn tally(&mut self, _cfg: &mut sockperf::Config, t: &mut Tally, _end: &ConnEnd) {
        let c = self.counts();
        t.add("messages", c.messages);
        t.add("replies", c.replies);
        t.add("warmups", c.warmups);
    }
}

impl ServeApp for Tbench {
    fn tally(&mut self, _server: &mut (), t: &mut Tally, _end: &ConnEnd) {
        let c = self.counts();
        t.add("requests", c.requests);
        t.add("request_bytes", c.bytes_in);
        t.add("response_bytes", c.bytes_out);
    }
}

impl ServeApp for Http {
    fn tally(&mut self, _cfg: &mut http::Config, t: &mut Tally, _end: &ConnEnd) {
        let c = self.counts();
        t.add("requests", c.requests);
        t.add("responses_200", c.ok);
        t.add("responses_other", c.requests - c.ok);
        t.add("body_bytes", c.body_bytes);
    }
}

impl ServeApp for Iperf3 {
    fn tally(&mut self, _server: &mut iperf3::Server, _t: &mut Tally, _end: &ConnEnd) {}

    /// Each finished test: counted, and its report kept (per stream: the server's count
    /// and the client's).
    fn tally_server(server: &mut iperf3::Server, t: &mut Tally) {
        while let Some(r) = server.take_finished() {
            t.add("sessions", 1);
            t.add("sessions_completed", u64::from(r.completed));
            for s in &r.streams {
                if s.sender {
                    t.add("stream_bytes_sent", s.bytes);
                } else {
                    t.add("stream_bytes_received", s.bytes);
                }
            }
            t.report(json!({
                "cookie": r.cookie,
                "completed": r.completed,
                "error": r.error.map(|e| e.to_string()),
                "seconds": r.seconds,
                "parallel": r.params.parallel,
                "reverse": r.params.reverse,
                "bidir": r.params.bidir,
                "window": r.params.window,
                "mss": r.params.mss,
                "no_delay": r.params.no_delay,
                "streams": r.streams.iter().map(|s| json!({
                    "id": s.id, "sender": s.sender, "bytes": s.bytes, "client_bytes": s.client_bytes,
                })).collect::<Vec<_>>(),
            }));
        }
    }
}

impl ServeApp for Discard {
    fn tally(&mut self, cfg: &mut discard::Config, t: &mut Tally, end: &ConnEnd) {
        t.add("bytes", self.bytes());
        if !self.end_file(cfg, end.end) {
            t.add("files_never_opened", 1);
        }
        if let Some(sha256) = self.finish_digest() {
            let d = DigestRecord {
                flow: end.flow.clone(),
                local_port: end.local_port,
                bytes: self.bytes(),
                sha256,
                end: end.end,
                queue: None,
            };
            // As weir-sink's printer prints it.
            println!(
                "connection {} {}: {} bytes, sha256 {}",
                d.flow, d.end, d.bytes, d.sha256
            );
            t.digest(d);
        }
    }

    fn opened(&mut self, cfg: &mut discard::Config, flow: Option<&FlowKey>) {
        self.set_flow(cfg, flow);
    }

    /// `--write-dir`: waits for the writer to write what it holds, then its records.
    fn stop_server(cfg: &mut discard::Config, t: &mut Tally) {
        let Some(wd) = cfg.write_dir.as_mut() else {
            return;
        };
        let (files, w) = wd.stop();
        t.add("files", w.files);
        t.add("files_incomplete", w.incomplete);
        t.add("write_errors", w.errors);
        t.add("written_bytes", w.bytes);
        t.add("write_stalls", w.stalls);
        t.files = files;
    }
}
