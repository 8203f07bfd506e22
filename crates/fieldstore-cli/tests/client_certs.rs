//! TLS client certificates as identities (docs/authorization.md), with a real `fieldstore
//! server` and real `fieldstore` clients, and certificates made at test time: a certificate's
//! Common Name is the identity whose `certificate:` names it.

mod common;
#[path = "common/server.rs"]
mod server;

use std::path::PathBuf;
use std::process::{Command, Output};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use server::Served;

const TOKENS: &str = "identities:
  - name: reader
    certificate: reader-1
    role: reader
  - name: writer
    certificate: writer-1
    role: writer
  - name: ops
    token: ops-token-333
    certificate: ops-1
    role: operator
";

const DB1: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    /// A CA, a server certificate for localhost, client certificates `<cn>.pem`/`<cn>.key`
    /// signed by the CA, and one (`writer-1` again) signed by another CA.
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let site = Site { dir };
        std::fs::write(
            site.path("local.yaml"),
            format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                site.path("root").display()
            ),
        )
        .unwrap();
        std::fs::write(site.path("tokens.yaml"), TOKENS).unwrap();
        let ca = new_ca();
        std::fs::write(site.path("ca.pem"), ca.pem()).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&server_key, &ca)
            .unwrap();
        std::fs::write(site.path("server.pem"), server.pem()).unwrap();
        std::fs::write(site.path("server.key"), server_key.serialize_pem()).unwrap();
        for cn in ["reader-1", "writer-1", "ops-1", "stranger-1"] {
            site.client_certificate(&ca, cn, cn);
        }
        site.client_certificate(&new_ca(), "writer-1", "forged");
        site
    }

    fn client_certificate(&self, ca: &CertifiedIssuer<'static, KeyPair>, cn: &str, file: &str) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Test");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, ca).unwrap();
        std::fs::write(self.path(&format!("{file}.pem")), cert.pem()).unwrap();
        std::fs::write(self.path(&format!("{file}.key")), key.serialize_pem()).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, config: &str, args: &[&str]) -> Command {
        let mut c = common::fieldstore();
        c.arg("--config").arg(self.path(config)).args(args);
        c
    }

    fn serve(&self, extra: &[&str]) -> Served {
        let p = |n: &str| self.path(n).to_str().unwrap().to_string();
        let mut args = vec![
            "server".to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--tokens".into(),
            p("tokens.yaml"),
            "--tls-cert".into(),
            p("server.pem"),
            "--tls-key".into(),
            p("server.key"),
            "--tls-client-ca".into(),
            p("ca.pem"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        server::start(self.command("local.yaml", &args), self.dir.path(), "unused")
    }

    /// `<name>.yaml`: a remote config presenting certificate `cert` (if any) and `token`.
    fn client(&self, served: &Served, name: &str, cert: Option<&str>, token: Option<&str>) {
        let mut tls = format!(
            "{{ca: {}, server_name: localhost",
            self.path("ca.pem").display()
        );
        if let Some(c) = cert {
            tls += &format!(
                ", cert: {}, key: {}",
                self.path(&format!("{c}.pem")).display(),
                self.path(&format!("{c}.key")).display()
            );
        }
        tls += "}";
        let token = token.map(|t| format!("token: {t}\n")).unwrap_or_default();
        std::fs::write(
            self.path(&format!("{name}.yaml")),
            format!(
                "type: remote\nhost: 127.0.0.1\nport: {}\n{token}tls: {tls}\n",
                served.port
            ),
        )
        .unwrap();
    }

    fn run(&self, who: &str, args: &[&str]) -> Output {
        self.command(&format!("{who}.yaml"), args).output().unwrap()
    }

    fn ok(&self, who: &str, args: &[&str]) -> String {
        common::succeeded(&format!("{who} {args:?}"), &self.run(who, args))
    }

    fn fails(&self, who: &str, args: &[&str]) -> String {
        common::failed(&format!("{who} {args:?}"), &self.run(who, args))
    }

    fn sample(&self, expver: &str) -> PathBuf {
        let p = self.path(&format!("{expver}.grib"));
        let out = p.to_str().unwrap();
        let o = self
            .command(
                "local.yaml",
                &[
                    "sample", "--out", out, "--steps", "0/6", "--params", "t", "--levels", "500",
                    "--points", "50", "--expver", expver,
                ],
            )
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        p
    }
}

fn new_ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "Test CA");
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

#[test]
fn a_client_certificate_is_the_identity_that_names_its_common_name() {
    let site = Site::new();
    let served = site.serve(&[]);
    for (name, cert, token) in [
        ("reader", Some("reader-1"), None),
        ("writer", Some("writer-1"), None),
        ("ops", Some("ops-1"), None),
        ("stranger", Some("stranger-1"), None),
        ("forged", Some("forged"), None),
        ("bare", None, Some("ops-token-333")),
        ("both", Some("ops-1"), Some("ops-token-333")),
        ("mixed", Some("writer-1"), Some("ops-token-333")),
    ] {
        site.client(&served, name, cert, token);
    }
    let grib = site.sample("0001");
    let grib = grib.to_str().unwrap();

    // The writer archives, and its database records it as creator.
    site.ok("writer", &["write", grib]);
    let dump = site.ok("ops", &["dump", DB1]);
    assert!(dump.contains("created by 'writer'"), "{dump}");

    // The server's log says who connected, by identity and certificate.
    let log = std::fs::read_to_string(site.path("server.log")).unwrap();
    assert!(
        log.lines().any(|l| l.contains("client connected")
            && l.contains("identity=writer")
            && l.contains("CN=writer-1, O=Test")),
        "{log}"
    );

    // The reader lists and reads, but may not archive.
    let listed = site.ok("reader", &["list", "class=od", "--porcelain"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    let out = site.path("read.grib");
    let all = format!("{DB1},type=fc,levtype=pl,param=t,levelist=500,step=0/6");
    site.ok("reader", &["read", &all, out.to_str().unwrap()]);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(site.path("0001.grib")).unwrap()
    );
    let e = site.fails("reader", &["write", grib]);
    assert!(e.contains("identity 'reader' may not archive"), "{e}");

    // A certificate of the CA that no identity names: refused, naming its subject.
    let e = site.fails("stranger", &["list", "class=od"]);
    assert!(
        e.contains("the client certificate 'CN=stranger-1, O=Test' is not one of this server's identities: no identity has `certificate: stranger-1`"),
        "{e}"
    );
    // The right name signed by another CA never gets past TLS.
    let e = site.fails("forged", &["list", "class=od"]);
    assert!(e.contains("asks for client certificates"), "{e}");
    assert!(
        std::fs::read_to_string(site.path("server.log"))
            .unwrap()
            .contains("TLS handshake: invalid peer certificate"),
        "the server logs why the handshake failed"
    );
    // The certificate is required: a token alone does not do.
    let e = site.fails("bare", &["list", "class=od"]);
    assert!(e.contains("asks for client certificates"), "{e}");

    // A certificate and a token must name the same identity.
    site.ok("both", &["list", "class=od"]);
    let e = site.fails("mixed", &["list", "class=od"]);
    assert!(
        e.contains("ambiguous: the client certificate 'CN=writer-1, O=Test' is identity 'writer' but the token is identity 'ops'"),
        "{e}"
    );
}

#[test]
fn with_optional_client_certificates_a_token_still_does() {
    let site = Site::new();
    let served = site.serve(&["--tls-client-optional"]);
    site.client(&served, "bare", None, Some("ops-token-333"));
    site.client(&served, "nobody", None, None);
    site.client(&served, "reader", Some("reader-1"), None);
    site.ok("bare", &["list", "class=od"]);
    site.ok("reader", &["list", "class=od"]);
    let e = site.fails("nobody", &["list", "class=od"]);
    assert!(
        e.contains("requires a token or a client certificate and the client sent neither"),
        "{e}"
    );
}
