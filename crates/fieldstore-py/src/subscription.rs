//! `FDB.subscribe` and `FDB.retrieve(..., wait=)`: fields as flushes make them visible, waited
//! for with the GIL released, in slices short enough that Ctrl-C is seen.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fieldstore::api::{self, Position, RetrieveWait, Start, SubscriptionBox};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{io_to_py, to_py};
use crate::listing::ListElement;
use crate::reader::Reader;
use crate::strings::dict_of;
use crate::sync::lock;

/// The longest the GIL-free wait lasts before Python's signals are looked at again.
const SLICE: Duration = Duration::from_millis(200);

/// `"now"`, `"beginning"`, or a position token (`Subscription.position`).
pub fn start(text: &str) -> PyResult<Start> {
    match text.trim() {
        "now" => Ok(Start::Now),
        "beginning" => Ok(Start::Beginning),
        token => Position::from_token(token).map(Start::At).map_err(to_py),
    }
}

/// Seconds as a duration; `None` (wait forever) stays `None`.
pub fn seconds(s: Option<f64>, what: &str) -> PyResult<Option<Duration>> {
    match s {
        None => Ok(None),
        Some(s) if (0.0..1e9).contains(&s) => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(PyValueError::new_err(format!(
            "{what}={s}: expected seconds, 0 or more"
        ))),
    }
}

/// The fields matching a request as flushes make them visible, each once, in each database's
/// flush order. Iterating waits up to `timeout` seconds per field (forever if None) and ends
/// when none came in time; `next(timeout)` returns None instead. `position` is where to resume.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct Subscription {
    sub: Mutex<SubscriptionBox>,
    /// Kept beside the subscription so reading it never waits for a thread blocked in `next`.
    position: Mutex<String>,
    timeout: Option<Duration>,
}

impl Subscription {
    pub fn new(sub: SubscriptionBox, timeout: Option<Duration>) -> Self {
        let position = sub.position().to_token();
        Subscription {
            sub: Mutex::new(sub),
            position: Mutex::new(position),
            timeout,
        }
    }

    fn wait(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Option<ListElement>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut sub = lock(py, &self.sub);
        loop {
            let slice = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    left.min(SLICE)
                }
                None => SLICE,
            };
            let s: &mut SubscriptionBox = &mut sub;
            let got = py
                .detach(|| s.next_within(slice).map(|n| n.map(|n| (n, s.position()))))
                .map_err(to_py)?;
            if let Some((notice, position)) = got {
                let token = position.to_token();
                *lock(py, &self.position) = token.clone();
                return Ok(Some(ListElement::notice(
                    notice.element,
                    token,
                    notice.data,
                )));
            }
            py.check_signals()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }
}

#[pymethods]
impl Subscription {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<ListElement>> {
        self.wait(py, self.timeout)
    }

    /// The next field, waiting up to `timeout` seconds (forever if None); None if none came.
    #[pyo3(signature = (timeout = None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<ListElement>> {
        self.wait(py, seconds(timeout, "timeout")?)
    }

    /// Where to resume (`FDB.subscribe(request, start=position)`) to get exactly the fields this
    /// subscription has not returned yet: a text token to keep.
    #[getter]
    fn position(&self, py: Python<'_>) -> String {
        lock(py, &self.position).clone()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Subscription(position={})", self.position(py))
    }
}

struct WaitState {
    wait: RetrieveWait,
    /// Arrived and not read yet, in order.
    ready: VecDeque<Box<dyn api::DataReader>>,
    done: bool,
}

/// A retrieve that waits: the fields a request names, as each is flushed. `read()` gives the
/// bytes in arrival order (blocking for what is not there yet, `b""` once all came); iterating
/// gives one Reader per arrival (first everything already there, then each new field).
/// A `fieldstore.TimeoutError` naming the missing fields if the wait runs out.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct WaitingReader {
    fdb: Arc<dyn api::Fdb>,
    state: Mutex<WaitState>,
}

impl WaitingReader {
    pub fn new(fdb: Arc<dyn api::Fdb>, wait: RetrieveWait) -> Self {
        WaitingReader {
            fdb,
            state: Mutex::new(WaitState {
                wait,
                ready: VecDeque::new(),
                done: false,
            }),
        }
    }
}

/// The next arrival, waited for with the GIL released.
fn arrive(
    py: Python<'_>,
    fdb: &dyn api::Fdb,
    st: &mut WaitState,
) -> PyResult<Option<Box<dyn api::DataReader>>> {
    if let Some(r) = st.ready.pop_front() {
        return Ok(Some(r));
    }
    if st.done {
        return Ok(None);
    }
    let wait = &mut st.wait;
    let got = py.detach(|| wait.next(fdb)).map_err(to_py)?;
    if got.is_none() {
        st.done = true;
    }
    Ok(got)
}

#[pymethods]
impl WaitingReader {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Reader>> {
        let mut st = lock(py, &self.state);
        Ok(arrive(py, &*self.fdb, &mut st)?.map(Reader::new))
    }

    /// Up to `n` bytes (everything, waiting for all of it, if `n` is negative or omitted);
    /// `b""` once every field was read.
    #[pyo3(signature = (n = -1))]
    fn read<'py>(&self, py: Python<'py>, n: Option<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let limit = n.filter(|n| *n >= 0).map(|n| n as u64);
        let mut st = lock(py, &self.state);
        let mut out = Vec::new();
        loop {
            if limit.is_some_and(|l| out.len() as u64 >= l) {
                break;
            }
            let Some(mut r) = arrive(py, &*self.fdb, &mut st)? else {
                break;
            };
            let left = r.size().saturating_sub(r.tell());
            let take = limit.map_or(left, |l| left.min(l - out.len() as u64));
            let take = usize::try_from(take)
                .map_err(|_| PyValueError::new_err("read size does not fit in memory"))?;
            let start = out.len();
            out.resize(start + take, 0);
            let buf = &mut out[start..];
            py.detach(|| std::io::Read::read_exact(&mut r, buf))
                .map_err(io_to_py)?;
            if r.tell() < r.size() {
                st.ready.push_front(r);
            }
            if limit.is_some() && !out.is_empty() {
                break;
            }
        }
        Ok(PyBytes::new(py, &out))
    }

    fn readall<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.read(py, None)
    }

    fn readable(&self) -> bool {
        true
    }

    /// The keys of the fields not given yet, in request order.
    #[getter]
    fn missing<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let st = lock(py, &self.state);
        st.wait
            .missing()
            .iter()
            .map(|k| dict_of(py, &[k]))
            .collect()
    }
}
