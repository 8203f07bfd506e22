//! Test doubles shared by the frontends' and the remote layer's tests.

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::fdb::Fdb;
use super::{ApiError, LocalFdb};

/// A local store in `dir`.
pub(crate) fn local(dir: &std::path::Path) -> Arc<LocalFdb> {
    let yaml = format!("spaces: [{{roots: [{{path: {}}}]}}]", dir.display());
    match crate::model::config::from_yaml_str(&yaml, "test").unwrap() {
        crate::model::config::FdbConfig::Local(l) => Arc::new(LocalFdb::new(l).unwrap()),
        other => panic!("expected a local config, got {other:?}"),
    }
}

/// A memory store of its own.
pub(crate) fn memory() -> Arc<LocalFdb> {
    match crate::model::config::from_yaml_str("{engine: memory}", "test").unwrap() {
        crate::model::config::FdbConfig::Local(l) => Arc::new(LocalFdb::new(l).unwrap()),
        other => panic!("expected a local config, got {other:?}"),
    }
}

/// The key of one surface field of a forecast (2t), by step.
pub(crate) fn sfc_key(step: u32) -> crate::model::Key {
    crate::model::Key::parse(&format!("class=od,expver=0001,stream=oper,date=20260101,time=0000,type=fc,levtype=sfc,step={step},param=167")).unwrap()
}

/// Where the flush waits: before the local store's flush, or after it.
type Hold = Arc<Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>, bool)>>>;

/// A handle whose next flush, once armed, says it started and waits to be released (at most a
/// minute, so a failing test never hangs); everything else goes to a local store. Clones share
/// the arming, so a server's per-connection handles can be held from the test.
#[derive(Clone)]
pub(crate) struct SlowFlush {
    pub inner: Arc<LocalFdb>,
    hold: Hold,
}

impl SlowFlush {
    pub fn new(inner: Arc<LocalFdb>) -> SlowFlush {
        SlowFlush {
            inner,
            hold: Arc::default(),
        }
    }

    pub fn arm(&self, entered: mpsc::Sender<()>, release: mpsc::Receiver<()>) {
        *self.hold.lock().unwrap() = Some((entered, release, false));
    }

    /// Holds the next flush once the local store's flush is done.
    pub fn arm_after(&self, entered: mpsc::Sender<()>, release: mpsc::Receiver<()>) {
        *self.hold.lock().unwrap() = Some((entered, release, true));
    }
}

impl Fdb for SlowFlush {
    fn name(&self) -> String {
        "slow".into()
    }
    fn forward_to(&self) -> Option<&dyn Fdb> {
        Some(&*self.inner)
    }
    fn flush(&self) -> Result<(), ApiError> {
        let hold = self.hold.lock().unwrap().take();
        let wait = |(entered, release): (mpsc::Sender<()>, mpsc::Receiver<()>)| {
            let _ = entered.send(());
            let _ = release.recv_timeout(Duration::from_secs(60));
        };
        match hold {
            Some((entered, release, true)) => {
                let flushed = self.inner.flush();
                wait((entered, release));
                flushed
            }
            Some((entered, release, false)) => {
                wait((entered, release));
                self.inner.flush()
            }
            None => self.inner.flush(),
        }
    }
}

/// Holds `fdb`'s next flush by the hold `arm` sets up (it must send on the sender when the flush
/// reaches it and wait on the receiver), runs `archive` on another thread meanwhile, and says
/// whether those archives finished while the flush was held. The flush is let go whatever
/// happened, so a test that fails never hangs; both threads' results must be Ok.
pub(crate) fn archives_during_held_flush<F: Fdb + Send + Sync + 'static>(
    fdb: &Arc<F>,
    arm: impl FnOnce(mpsc::Sender<()>, mpsc::Receiver<()>),
    archive: impl FnOnce(&F) -> Result<(), ApiError> + Send + 'static,
) -> bool {
    let (entered, started) = mpsc::channel();
    let (release, released) = mpsc::channel();
    arm(entered, released);
    let flusher = std::thread::spawn({
        let fdb = fdb.clone();
        move || fdb.flush()
    });
    started
        .recv_timeout(Duration::from_secs(30))
        .expect("the flush reached its hold");
    let (done, finished) = mpsc::channel();
    let archiver = std::thread::spawn({
        let fdb = fdb.clone();
        move || -> Result<(), ApiError> {
            archive(&fdb)?;
            let _ = done.send(());
            Ok(())
        }
    });
    let went_on = finished.recv_timeout(Duration::from_secs(15));
    let _ = release.send(());
    flusher.join().unwrap().unwrap();
    archiver.join().unwrap().unwrap();
    went_on.is_ok()
}

/// One local store behind many handles (a server's per-connection handles), with nothing in
/// between: subscriptions with data take the store's own path.
pub(crate) struct Shared(pub Arc<LocalFdb>);

impl Fdb for Shared {
    fn name(&self) -> String {
        "shared".into()
    }
    fn forward_to(&self) -> Option<&dyn Fdb> {
        Some(&*self.0)
    }
    fn subscribe_with_data(
        &self,
        request: &crate::model::request::Request,
        start: &super::subscribe::Start,
    ) -> Result<super::subscribe::SubscriptionBox, ApiError> {
        self.0.subscribe_with_data(request, start)
    }
}
