//! The test MinIO (scripts/minio, tests/support/minio.rs) starts, takes SigV4-signed requests and
//! honours create-only conditional writes (`If-None-Match: *`), which the S3 backend's visibility
//! markers rely on: the second create of the same key must get 412.

#[path = "support/minio.rs"]
mod minio;

use std::time::{Duration, Instant, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings,
};
use aws_sigv4::sign::v4;

/// Sends one SigV4-signed request and returns the status and body.
fn send(
    server: &minio::Minio,
    method: &str,
    path: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    let url = format!("{}{}", server.endpoint, path);
    let identity = Credentials::new(
        &server.access_key,
        &server.secret_key,
        None,
        None,
        "fieldstore-test",
    )
    .into();
    let mut settings = SigningSettings::default();
    // S3 wants the payload hash in x-amz-content-sha256.
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .expect("signing params")
        .into();
    let signable = SignableRequest::new(
        method,
        &url,
        extra.iter().copied(),
        SignableBody::Bytes(body),
    )
    .expect("signable request");
    let (instructions, _signature) = sign(signable, &params).expect("sign").into_parts();

    let mut req = ureq::http::Request::builder().method(method).uri(&url);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    for (k, v) in instructions.headers() {
        req = req.header(k, v);
    }
    let req = req.body(body.to_vec()).expect("request");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent.run(req).expect("HTTP request to MinIO");
    let status = resp.status().as_u16();
    let body = resp.body_mut().read_to_vec().expect("response body");
    (status, body)
}

#[test]
fn minio_put_get_and_create_only() {
    let started = Instant::now();
    let Some(server) = minio::Minio::start_or_skip("minio_put_get_and_create_only") else {
        return;
    };
    let startup = started.elapsed();
    eprintln!("MinIO ready at {} in {startup:?}", server.endpoint);
    assert!(
        startup < Duration::from_secs(10),
        "MinIO took {startup:?} to start"
    );

    let (status, body) = send(&server, "PUT", "/fields", &[], b"");
    assert_eq!(
        status,
        200,
        "create bucket: {}",
        String::from_utf8_lossy(&body)
    );

    let create_only = [("if-none-match", "*")];
    let (status, body) = send(&server, "PUT", "/fields/a/marker", &create_only, b"first");
    assert_eq!(
        status,
        200,
        "first create: {}",
        String::from_utf8_lossy(&body)
    );

    let (status, body) = send(&server, "PUT", "/fields/a/marker", &create_only, b"second");
    assert_eq!(
        status,
        412,
        "second create: {}",
        String::from_utf8_lossy(&body)
    );

    let (status, body) = send(&server, "GET", "/fields/a/marker", &[], b"");
    assert_eq!(status, 200);
    assert_eq!(
        body, b"first",
        "the losing create must not have overwritten the object"
    );

    let pid = server.pid;
    drop(server);
    let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
    assert!(!alive, "MinIO (pid {pid}) still running after drop");
}
