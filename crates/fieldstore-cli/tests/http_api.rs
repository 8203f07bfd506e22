//! The HTTP API (docs/http.md) of a real `fieldstore server --http` process, driven by a real
//! client (curl): listings and bytes equal to the CLI's, ranges, events after another process
//! writes, the same identities as the binary protocol (a wrong token refused), and bad
//! requests answered with 4xx while the server goes on serving others.

mod common;
#[path = "common/server.rs"]
mod server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use server::Served;

const TOKENS: &str = "identities:
  - name: reader
    token: reader-token-1
    role: reader
  - name: writer
    token: writer-token-2
    role: writer
  - name: od1
    token: od1-token-3
    allow:
      - operations: [list, retrieve]
        databases: class=od,expver=0001
";

const REQ: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl";
/// Every field `Site::write` writes by default, named completely (as retrieve needs).
const ALL: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,domain=g,param=130/131,levelist=500/850,step=0/6/12";

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("local.yaml"),
            format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                dir.path().join("root").display()
            ),
        )
        .unwrap();
        std::fs::write(dir.path().join("tokens.yaml"), TOKENS).unwrap();
        Site { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn cli(&self, args: &[&str]) -> String {
        let mut c = common::fieldstore();
        c.arg("--config").arg(self.path("local.yaml")).args(args);
        common::succeeded(&format!("{args:?}"), &c.output().unwrap())
    }

    /// Sample fields (t and u on two levels, three steps; or what `extra` says) written and
    /// flushed by the CLI.
    fn write(&self, name: &str, extra: &[&str]) {
        let f = self.path(name);
        let mut opts = vec![
            ("--params", "t/u"),
            ("--levels", "500/850"),
            ("--steps", "0/6/12"),
            ("--points", "2000"),
        ];
        for pair in extra.chunks(2) {
            match opts.iter_mut().find(|(o, _)| *o == pair[0]) {
                Some(o) => o.1 = pair[1],
                None => opts.push((pair[0], pair[1])),
            }
        }
        let mut args = vec!["sample", "--out", f.to_str().unwrap()];
        for (o, v) in opts {
            args.extend([o, v]);
        }
        self.cli(&args);
        self.cli(&["write", f.to_str().unwrap()]);
    }

    fn serve(&self, extra: &[&str]) -> Served {
        let mut c = common::fieldstore();
        c.arg("--config")
            .arg(self.path("local.yaml"))
            .args(["server", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .arg("--tokens")
            .arg(self.path("tokens.yaml"))
            .args(extra);
        server::start(c, self.dir.path(), "reader-token-1")
    }
}

/// A curl answer: status, headers (lowercased names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// GET with curl; `args` are curl's (headers...), the query's values are URL-encoded.
fn get(base: &str, path: &str, query: &[(&str, &str)], args: &[&str]) -> Answer {
    let dir = tempfile::tempdir().unwrap();
    let (body, head) = (dir.path().join("body"), dir.path().join("head"));
    let mut c = Command::new("curl");
    c.args(["-s", "-S", "--max-time", "60", "-G"])
        .arg("-o")
        .arg(&body)
        .arg("-D")
        .arg(&head)
        .args(args)
        .arg(format!("http://{base}{path}"));
    for (k, v) in query {
        c.arg("--data-urlencode").arg(format!("{k}={v}"));
    }
    let out = c
        .output()
        .expect("curl is installed (scripts/install-deps --tests)");
    assert!(
        out.status.success(),
        "curl {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_answer(
        &std::fs::read(&head).unwrap(),
        std::fs::read(&body).unwrap_or_default(),
    )
}

fn parse_answer(head: &[u8], body: Vec<u8>) -> Answer {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body,
    }
}

const READER: &str = "Authorization: Bearer reader-token-1";

fn auth(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

#[test]
fn the_api_answers_as_the_cli_does() {
    let site = Site::new();
    site.write("a.grib", &[]);
    let served = site.serve(&[]);
    let base = served.http.clone().expect("an http line");
    let h = ["-H", READER];

    // extract: the CLI's JSON, point for point (ranges, a point), and CoverageJSON.
    let q = format!("{REQ},param=130/131,levelist=500,step=0/6/12");
    let cli = site.cli(&[
        "extract", &q, "--range", "0-4", "--point", "10,20", "--json",
    ]);
    let a = get(
        &base,
        "/api/v1/extract",
        &[("request", &q), ("range", "0-4"), ("point", "10,20")],
        &h,
    );
    assert_eq!(a.status, 200, "{}", a.text());
    let want: serde_json::Value = serde_json::from_str(&cli).unwrap();
    assert_eq!(a.json(), want);
    assert_eq!(want.as_array().unwrap().len(), 6);
    let a = get(
        &base,
        "/api/v1/extract",
        &[("request", &q), ("point", "10,20"), ("format", "covjson")],
        &h,
    );
    assert_eq!(a.status, 200, "{}", a.text());
    let cov = a.json();
    assert_eq!(cov["type"], "CoverageCollection");
    assert_eq!(cov["domainType"], "PointSeries");

    // list: porcelain exactly the CLI's lines; JSON one element per field.
    let cli = site.cli(&["list", "--porcelain", REQ]);
    assert_eq!(cli.lines().count(), 12, "{cli}");
    let a = get(
        &base,
        "/api/v1/list",
        &[("request", REQ), ("format", "porcelain")],
        &h,
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), cli);
    let a = get(&base, "/api/v1/list", &[("request", REQ)], &h);
    assert_eq!(a.status, 200, "{}", a.text());
    let fields = a.json();
    assert_eq!(fields.as_array().unwrap().len(), 12);
    assert_eq!(fields[0]["key"]["class"], "od");
    assert!(fields[0]["request"].as_str().unwrap().contains("step="));

    // retrieve: the bytes of `fieldstore read`.
    let want = site.path("read.grib");
    site.cli(&["read", ALL, want.to_str().unwrap()]);
    let want = std::fs::read(&want).unwrap();
    let a = get(&base, "/api/v1/retrieve", &[("request", ALL)], &h);
    assert_eq!(a.status, 200);
    assert_eq!(a.header("x-fieldstore-fields"), Some("12"));
    assert!(
        a.body == want,
        "retrieve: {} bytes, read: {}",
        a.body.len(),
        want.len()
    );

    // One field by its full key, and ranges of it.
    let one = fields[3]["request"].as_str().unwrap().to_string();
    let whole = get(&base, "/api/v1/retrieve", &[("request", &one)], &h);
    assert_eq!(whole.status, 200);
    assert_eq!(whole.header("accept-ranges"), Some("bytes"));
    assert_eq!(&whole.body[..4], b"GRIB");
    let n = whole.body.len();
    let part = get(
        &base,
        "/api/v1/retrieve",
        &[("request", &one)],
        &["-H", READER, "-H", "Range: bytes=10-99"],
    );
    assert_eq!(part.status, 206);
    assert_eq!(part.body, whole.body[10..100]);
    assert_eq!(
        part.header("content-range"),
        Some(format!("bytes 10-99/{n}").as_str())
    );
    let tail = get(
        &base,
        "/api/v1/retrieve",
        &[("request", &one)],
        &["-H", READER, "-H", "Range: bytes=-4"],
    );
    assert_eq!(tail.body, b"7777");
    let over = get(
        &base,
        "/api/v1/retrieve",
        &[("request", &one)],
        &["-H", READER, "-H", &format!("Range: bytes={n}-")],
    );
    assert_eq!(over.status, 416);

    // axes, where, stats.
    let a = get(&base, "/api/v1/axes", &[("request", REQ)], &h);
    assert_eq!(a.status, 200);
    let axes = a.json();
    assert_eq!(axes["step"], serde_json::json!(["0", "12", "6"]));
    assert_eq!(axes["levelist"].as_array().unwrap().len(), 2);
    let a = get(&base, "/api/v1/where", &[("request", "class=od")], &h);
    assert_eq!(a.status, 200);
    assert_eq!(a.json().as_array().unwrap().len(), 1);
    let a = get(&base, "/api/v1/stats", &[("request", "class=od")], &h);
    assert_eq!(a.json()[0]["fields"], 12);

    // The OpenAPI document names every route.
    let a = get(&base, "/api/v1/openapi.json", &[], &[]);
    let doc = a.json();
    for p in [
        "list", "axes", "where", "stats", "retrieve", "extract", "events", "field", "series",
    ] {
        assert!(
            doc["paths"][format!("/api/v1/{p}")].is_object(),
            "openapi lacks {p}"
        );
    }
    // The web view is there, without a token (it holds no data).
    let a = get(&base, "/", &[], &[]);
    assert_eq!(a.status, 200);
    assert!(a.text().contains("<canvas id=\"map\""));
    assert!(get(&base, "/coastlines.bin", &[], &[]).body.len() > 10_000);
}

#[test]
fn refusals_and_bad_requests_are_json_4xx_and_the_server_serves_on() {
    let site = Site::new();
    site.write("a.grib", &[]);
    site.write("b.grib", &["--class", "rd"]);
    let served = site.serve(&["--max-requests-per-identity", "4"]);
    let base = served.http.clone().unwrap();
    let h = ["-H", READER];
    let check = |a: Answer, status: u16, kind: &str| {
        assert_eq!(a.status, status, "{}", a.text());
        let e = a.json();
        assert_eq!(e["kind"], kind, "{e}");
        assert_eq!(e["status"], status);
        assert!(!e["message"].as_str().unwrap().is_empty());
    };

    // Hostile connections first: half a request, garbage, a connection that vanishes.
    let mut half = TcpStream::connect(&base).unwrap();
    half.write_all(b"GET /api/v1/list?request=cl").unwrap();
    let mut garbage = TcpStream::connect(&base).unwrap();
    garbage
        .write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n")
        .unwrap();
    let mut reply = Vec::new();
    let _ = garbage.read_to_end(&mut reply);
    assert!(
        String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    drop(TcpStream::connect(&base).unwrap());

    // Who: no token, a wrong one; grants narrower than the request.
    check(
        get(&base, "/api/v1/list", &[("request", REQ)], &[]),
        401,
        "auth",
    );
    check(
        get(
            &base,
            "/api/v1/list",
            &[("request", REQ)],
            &["-H", &auth("nope")],
        ),
        401,
        "auth",
    );
    let a = get(
        &base,
        "/api/v1/list",
        &[("request", REQ)],
        &["-H", &auth("nope")],
    );
    assert!(a.header("www-authenticate").is_some());
    check(
        get(
            &base,
            "/api/v1/retrieve",
            &[("request", "class=rd,expver=0001")],
            &["-H", &auth("od1-token-3")],
        ),
        403,
        "permission",
    );
    // od1 lists only its databases; the reader sees both.
    let od1 = get(
        &base,
        "/api/v1/list",
        &[("request", "expver=0001"), ("format", "porcelain")],
        &["-H", &auth("od1-token-3")],
    );
    let all = get(
        &base,
        "/api/v1/list",
        &[("request", "expver=0001"), ("format", "porcelain")],
        &h,
    );
    assert_eq!(od1.text().lines().count(), 12);
    assert_eq!(all.text().lines().count(), 24);

    // What: malformed requests, parameters, routes, methods; nothing matching.
    check(
        get(&base, "/api/v1/list", &[("request", "class")], &h),
        400,
        "bad-request",
    );
    check(
        get(
            &base,
            "/api/v1/list",
            &[("request", REQ), ("format", "xml")],
            &h,
        ),
        400,
        "bad-request",
    );
    check(
        get(&base, "/api/v1/axes", &[("depth", "9")], &h),
        400,
        "bad-request",
    );
    check(get(&base, "/api/v1/retrieve", &[], &h), 400, "bad-request");
    check(
        get(&base, "/api/v1/list", &[("request", "class=xx")], &h),
        404,
        "not-found",
    );
    check(
        get(
            &base,
            "/api/v1/retrieve",
            &[("request", "class=xx,expver=0001")],
            &h,
        ),
        404,
        "not-found",
    );
    check(get(&base, "/api/v1/nothing", &[], &h), 404, "no-route");
    check(
        get(&base, "/api/v1/extract", &[("request", REQ)], &h),
        400,
        "bad-request",
    );
    check(
        get(
            &base,
            "/api/v1/extract",
            &[("request", REQ), ("range", "9-3")],
            &h,
        ),
        400,
        "bad-request",
    );
    check(
        get(
            &base,
            "/api/v1/extract",
            &[("request", REQ), ("point", "91,0")],
            &h,
        ),
        400,
        "bad-request",
    );
    check(
        get(&base, "/api/v1/list", &[], &["-H", READER, "-X", "DELETE"]),
        405,
        "bad-request",
    );
    check(
        get(
            &base,
            "/api/v1/events",
            &[("last_event_id", "{not a position")],
            &h,
        ),
        400,
        "bad-request",
    );
    let long = "x".repeat(70_000);
    check(
        get(&base, "/api/v1/list", &[("request", &long)], &h),
        413,
        "bad-request",
    );

    // The server went on: the half-sent request's client is still waiting, a good one is served.
    let a = get(
        &base,
        "/api/v1/list",
        &[("request", REQ), ("format", "porcelain")],
        &h,
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.text().lines().count(), 12);
    drop(half);
    // The binary protocol beside it is unaffected.
    std::fs::write(
        site.path("remote.yaml"),
        format!(
            "type: remote\nhost: 127.0.0.1\nport: {}\ntoken: reader-token-1\n",
            served.port
        ),
    )
    .unwrap();
    let mut c = common::fieldstore();
    c.arg("--config")
        .arg(site.path("remote.yaml"))
        .args(["list", "--porcelain", REQ]);
    assert_eq!(
        common::succeeded("remote list", &c.output().unwrap())
            .lines()
            .count(),
        12
    );
}

/// Reads an event stream until it holds `fields` field events or `within` passed.
fn events(base: &str, query: &str, extra: &[&str], fields: usize, within: Duration) -> String {
    let mut c = Command::new("curl");
    c.args([
        "-s",
        "-N",
        "--max-time",
        &within.as_secs().to_string(),
        "-H",
        READER,
    ])
    .args(extra)
    .arg(format!("http://{base}/api/v1/events?{query}"))
    .stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    let started = Instant::now();
    while started.elapsed() < within {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
        if text.matches("event: field\n").count() >= fields {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    text
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn events_stream_flushes_from_another_process_and_resume() {
    let site = Site::new();
    site.write("a.grib", &["--steps", "0"]);
    let served = site.serve(&[]);
    let base = served.http.clone().unwrap();
    let query = format!("request={}", enc("class=od,expver=0001,param=130"));

    // A subscriber from now; another process writes step 6 and 12; the events name them.
    let b = base.clone();
    let q = query.clone();
    let sub = std::thread::spawn(move || events(&b, &q, &[], 2, Duration::from_secs(40)));
    std::thread::sleep(Duration::from_millis(1500));
    site.write(
        "b.grib",
        &["--steps", "6/12", "--params", "t", "--levels", "500"],
    );
    let text = sub.join().unwrap();
    assert!(text.contains("event: start"), "{text}");
    let step_of = |l: &str| {
        l.split("\"step\":\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_string()
    };
    let steps = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("data: {\"key\""))
            .map(step_of)
            .collect()
    };
    let mut got = steps(&text);
    let first = got[0].clone();
    got.sort();
    assert_eq!(got, ["12", "6"], "{text}");

    // Resuming after the first field's id gives exactly the other.
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert_eq!(ids.len(), 3, "{text}");
    let again = events(
        &base,
        &query,
        &["-H", &format!("Last-Event-ID: {}", ids[1])],
        1,
        Duration::from_secs(10),
    );
    let rest = steps(&again);
    assert_eq!(rest.len(), 1, "{again}");
    assert_ne!(rest[0], first, "{again}");
    // From the beginning: all three steps of t/500 and the u and 850 fields at step 0 (6).
    let all = events(
        &base,
        &format!("{query}&start=beginning"),
        &[],
        4,
        Duration::from_secs(10),
    );
    assert_eq!(steps(&all).len(), 4, "{all}");
}

#[test]
fn map_values_and_series_are_eccodes_values() {
    let site = Site::new();
    site.write("a.grib", &["--params", "t", "--levels", "500"]);
    let served = site.serve(&[]);
    let base = served.http.clone().unwrap();
    let h = ["-H", READER];
    let one = format!("{REQ},param=130,levelist=500,step=6");
    let a = get(&base, "/api/v1/field", &[("request", &one)], &h);
    assert_eq!(a.status, 200, "{}", a.text());
    let mlen = u32::from_le_bytes(a.body[..4].try_into().unwrap()) as usize;
    let meta: serde_json::Value = serde_json::from_slice(&a.body[4..4 + mlen]).unwrap();
    let n = meta["n"].as_u64().unwrap() as usize;
    assert_eq!(n, meta["total"].as_u64().unwrap() as usize);
    assert_eq!(a.body.len(), 4 + mlen + 12 * n);
    assert_eq!(meta["gridType"], "regular_ll");
    assert_eq!(meta["units"], "K");
    let rows: usize = meta["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_u64().unwrap() as usize)
        .sum();
    assert_eq!(rows, n);
    // Thinned when asked: about max_points.
    let a = get(
        &base,
        "/api/v1/field",
        &[("request", &one), ("max_points", "1000")],
        &h,
    );
    let mlen = u32::from_le_bytes(a.body[..4].try_into().unwrap()) as usize;
    let thin: serde_json::Value = serde_json::from_slice(&a.body[4..4 + mlen]).unwrap();
    assert!(
        thin["n"].as_u64().unwrap() <= 1000 && thin["stride"].as_u64().unwrap() == 2,
        "{thin}"
    );
    // More than one field is not a map.
    let a = get(&base, "/api/v1/field", &[("request", REQ)], &h);
    assert_eq!(a.status, 400);

    // The series at a point: every step, each value ecCodes' nearest-point value.
    let all_steps = format!("{REQ},domain=g,param=130,levelist=500,step=0/6/12");
    let a = get(
        &base,
        "/api/v1/series",
        &[("request", &all_steps), ("lat", "10.3"), ("lon", "20.7")],
        &h,
    );
    assert_eq!(a.status, 200, "{}", a.text());
    let s = a.json();
    let points = s["points"].as_array().unwrap();
    assert_eq!(points.len(), 3);
    if let Some(grib_get) = which("grib_get") {
        let f = site.path("read.grib");
        site.cli(&["read", &all_steps, f.to_str().unwrap()]);
        let out = Command::new(grib_get)
            .args(["-F", "%.12g", "-l", "10.3,20.7,1", "-p", "step"])
            .arg(&f)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // `step value` per line, in the file's order.
        let want: std::collections::HashMap<String, f64> = text
            .lines()
            .map(|l| {
                let mut w = l.split_whitespace();
                let step = w.next().unwrap().to_string();
                (step, w.last().unwrap().parse().unwrap())
            })
            .collect();
        assert_eq!(want.len(), 3, "{text}");
        for p in points {
            let v = p["value"].as_f64().unwrap();
            let w = want[p["key"]["step"].as_str().unwrap()];
            assert!(
                (v - w).abs() < 1e-6 * w.abs().max(1.0),
                "{v} vs ecCodes {w}"
            );
        }
    }
    let a = get(
        &base,
        "/api/v1/series",
        &[("request", &all_steps), ("lat", "95"), ("lon", "0")],
        &h,
    );
    assert_eq!(a.status, 400);
}

#[test]
fn http_alone_serves_without_the_binary_protocol() {
    let site = Site::new();
    site.write("a.grib", &["--steps", "0"]);
    let mut c = common::fieldstore();
    c.arg("--config").arg(site.path("local.yaml")).args([
        "server",
        "--http",
        "127.0.0.1:0",
        "--token",
        "solo-token",
    ]);
    let served = server::start_http_only(c, site.dir.path(), "solo-token");
    let base = format!("127.0.0.1:{}", served.port);
    let a = get(
        &base,
        "/api/v1/list",
        &[("request", REQ), ("format", "porcelain")],
        &["-H", &auth("solo-token")],
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.text().lines().count(), 4);
    let a = get(
        &base,
        "/api/v1/list",
        &[("request", REQ)],
        &["-H", &auth("other")],
    );
    assert_eq!(a.status, 401);
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// HTTPS with the binary protocol's TLS: a verified client certificate is the identity its
/// Common Name names; without one, a bearer token; with neither, or a stranger's, 401.
#[test]
fn https_with_client_certificates_as_identities() {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair,
    };
    let site = Site::new();
    site.write("a.grib", &["--steps", "0"]);
    std::fs::write(
        site.path("tokens.yaml"),
        "identities:\n  - name: reader\n    certificate: reader-1\n    role: reader\n  - name: ops\n    token: ops-token-333\n    role: operator\n",
    )
    .unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "Test CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(site.path("ca.pem"), ca.pem()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    std::fs::write(site.path("server.pem"), cert.pem()).unwrap();
    std::fs::write(site.path("server.key"), key.serialize_pem()).unwrap();
    for cn in ["reader-1", "stranger-1"] {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let c = p.signed_by(&key, &ca).unwrap();
        std::fs::write(site.path(&format!("{cn}.pem")), c.pem()).unwrap();
        std::fs::write(site.path(&format!("{cn}.key")), key.serialize_pem()).unwrap();
    }
    let p = |n: &str| site.path(n).to_str().unwrap().to_string();
    let mut c = common::fieldstore();
    c.arg("--config").arg(site.path("local.yaml")).args([
        "server",
        "--http",
        "127.0.0.1:0",
        "--tokens",
        &p("tokens.yaml"),
        "--tls-cert",
        &p("server.pem"),
        "--tls-key",
        &p("server.key"),
        "--tls-client-ca",
        &p("ca.pem"),
        "--tls-client-optional",
    ]);
    let served = server::start_http_only(c, site.dir.path(), "");
    let status = |args: &[&str]| -> String {
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--cacert",
                &p("ca.pem"),
            ])
            .args(["--resolve", &format!("localhost:{}:127.0.0.1", served.port)])
            .args(args)
            .arg(format!(
                "https://localhost:{}/api/v1/list?request=class%3Dod",
                served.port
            ))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let reader = ["--cert", &p("reader-1.pem"), "--key", &p("reader-1.key")];
    assert_eq!(status(&reader), "200");
    assert_eq!(
        status(&["-H", "Authorization: Bearer ops-token-333"]),
        "200"
    );
    assert_eq!(status(&[]), "401");
    assert_eq!(
        status(&[
            "--cert",
            &p("stranger-1.pem"),
            "--key",
            &p("stranger-1.key")
        ]),
        "401"
    );
    // Plain HTTP on the TLS port is not served.
    let plain = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
        ])
        .arg(format!("http://127.0.0.1:{}/api/v1/list", served.port))
        .output()
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&plain.stdout), "200");
}

/// The binary protocol's limits answer over HTTP: requests in progress per identity (429) and
/// connections (503), both with `Retry-After`; once the holder leaves, the same requests pass.
#[test]
fn limits_answer_429_and_503() {
    let site = Site::new();
    site.write("a.grib", &["--steps", "0"]);
    let served = site.serve(&["--max-requests-per-identity", "1", "--max-connections", "3"]);
    let base = served.http.clone().unwrap();
    let h = ["-H", READER];
    // An event stream holds the reader's one request, and a connection.
    let mut stream = TcpStream::connect(&base).unwrap();
    write!(
        stream,
        "GET /api/v1/events?request=class%3Dod HTTP/1.1\r\nHost: x\r\n{READER}\r\n\r\n"
    )
    .unwrap();
    let mut first = [0u8; 64];
    let n = stream.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    let a = get(&base, "/api/v1/list", &[("request", REQ)], &h);
    assert_eq!(a.status, 429, "{}", a.text());
    assert_eq!(a.json()["kind"], "busy");
    assert_eq!(a.header("retry-after"), Some("1"));
    // Another identity is not held back by the reader's stream.
    let a = get(
        &base,
        "/api/v1/list",
        &[("request", REQ)],
        &["-H", &auth("writer-token-2")],
    );
    assert_eq!(a.status, 200);
    // Two idle connections more fill --max-connections: the next is refused, readably.
    let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&base).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let a = get(&base, "/api/v1/list", &[("request", REQ)], &h);
    assert_eq!(a.status, 503, "{}", a.text());
    assert_eq!(a.json()["kind"], "busy");
    drop(idle);
    drop(stream);
    // The holders gone, the same request is served.
    let started = Instant::now();
    loop {
        let a = get(&base, "/api/v1/list", &[("request", REQ)], &h);
        if a.status == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still {}: {}",
            a.status,
            a.text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
