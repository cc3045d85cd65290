//! Layout 3 keeps a decided step's decisions as they differ from a base set
//! instead of in full: an inlining benchmark's set names every call site
//! (thousands), and a step changes a few of them. The base is a decision
//! set stored once under its content hash (`set/<hash>`), the experiment's
//! start when the step was written, named in the step's value:
//! `{"checksum":"…","base":"<hash>",…,"decisions":{<the points that differ>},…}`.
//! A base never changes once stored, so a step reads back the same whatever
//! later runs make of its experiment. A step whose set lacks a point of the
//! base (none do today) is written in full, without one.
//!
//! A step whose summaries are its runs' own (what the worker computes from
//! them, as for every step measured in full) is stored without them, marked
//! `"summary_of_runs":true` (after its base): a one-run step's summaries
//! repeat each metric's value eleven times, and they were half its record.
//!
//! Since layout 6 a step's points are named by their number in its base where
//! it holds them all, marked `"by_number":true,` after the base ([`super::base_set`]),
//! and its instructions and code per function are written
//! against its experiment's reference profile the same way ([`super::profile`]),
//! named after its base: `"profile":{"of":"<hash>","gone":[…]},`.
//!
//! Since layout 7 a chain's state is written so too ([`seal_chain`]): its sets (where it is,
//! its best, its pending proposals) against its experiment's start, and the points it names
//! outside them (those varied, the screened effects) by number where the start holds them
//! all, marked `"points_by_number":true,` after `by_number`. States carry no checksum.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use kiln_protocol::message::summarise;
use kiln_protocol::{ContentHash, DecisionSet, SiteId};

use super::base_set::{BaseSet, Sets};
use super::profile::{self, Profile, ProfileBase, ProfileDelta};
use super::{checksum, layout, ChainState, Effect, ExperimentInfo, StepRecord, Store};

const BASE_OPEN: &[u8] = b"\"base\":\"";
const BASE_CLOSE: &[u8] = b"\",";
const HASH_DIGITS: usize = 64;
const BY_NUMBER: &[u8] = b"\"by_number\":true,";
const POINTS_BY_NUMBER: &[u8] = b"\"points_by_number\":true,";
const PROFILE_OPEN: &[u8] = b"\"profile\":";
const SUMMARY_OF_RUNS: &[u8] = b"\"summary_of_runs\":true,";

/// A base: its hash and its set.
pub(super) type Base = (ContentHash, Arc<BaseSet>);

/// A key to store and its value.
pub(super) type KeyValue = (String, Vec<u8>);

/// What an experiment's steps are written against: its start set and its
/// reference profile, where the store holds its info and the baseline has one.
#[derive(Clone, Default)]
pub(super) struct Starts {
    pub decisions: Option<Base>,
    pub profile: Option<ProfileBase>,
}

impl Starts {
    /// `info`'s starts, with the keys and values they are stored under.
    pub fn of(info: &ExperimentInfo) -> Result<(Starts, Vec<KeyValue>)> {
        let set = &info.baseline.decisions;
        let hash = set.hash();
        let mut keys = vec![(layout::set_key(&hash), serde_json::to_vec(set)?)];
        let profile = Profile::of(info)?.map(|(base, bytes)| {
            keys.push((layout::profile_key(&base.0), bytes));
            base
        });
        let starts = Starts {
            decisions: Some((hash, Arc::new(BaseSet::new(set.clone())))),
            profile,
        };
        Ok((starts, keys))
    }
}

/// The starts a store has read or written, and which each experiment's steps
/// are written against now.
#[derive(Default)]
pub(super) struct Bases {
    /// Each experiment's starts, none where the store holds no info of it.
    of_experiment: HashMap<String, Starts>,
    /// Sets by hash, as read from `set/<hash>`.
    by_hash: HashMap<ContentHash, Arc<BaseSet>>,
    /// Reference profiles by hash, as read from `profile/<hash>`.
    profiles: HashMap<ContentHash, Arc<Profile>>,
}

/// What a stored step's value says before its record's fields.
#[derive(Default)]
struct Header {
    base: Option<ContentHash>,
    by_number: bool,
    /// A chain state's points outside its sets, by number ([`Points`]).
    points_by_number: bool,
    profile: Option<ProfileDelta>,
    summary_of_runs: bool,
}

/// The stored value of a decided step: its JSON, its decisions as they
/// differ from its start where one is given and holds no point the step lacks
/// (by number where the start holds all of theirs and its diff's), its functions as they differ from its reference profile, its summaries
/// left out where its runs give them, sealed with its checksum.
pub(super) fn seal(record: &StepRecord, starts: &Starts) -> Result<Vec<u8>> {
    let m = &record.result.measurement;
    let of_runs = !m.summary.is_empty() && summarise(&m.runs) == m.summary;
    let mut written = record.clone();
    let (mut body, _) = against_start(starts, step_sets(&mut written));
    if let Some(delta) = (starts.profile.as_ref()).and_then(|p| profile::subtract(&mut written, p))
    {
        body.extend_from_slice(PROFILE_OPEN);
        body.extend_from_slice(&serde_json::to_vec(&delta)?);
        body.push(b',');
    }
    if of_runs {
        written.result.measurement.summary.clear();
        body.extend_from_slice(SUMMARY_OF_RUNS);
    }
    body.extend_from_slice(&serde_json::to_vec(&written)?[1..]);
    Ok(checksum::seal(&body))
}

/// The stored value of a chain's state: its JSON, its sets (where it is, its best, its
/// pending proposals) written against its experiment's start as a step's are. A state is
/// written again at every step, and a program's whole set is hundreds of kilobytes: twice
/// that a step, for states that changed a few points. The sets are written in place and put
/// back: a copy of the state would copy every set the chain measured.
pub(super) fn seal_chain(state: &mut ChainState, starts: &Starts) -> Result<Vec<u8>> {
    let (mut body, originals) = against_start(starts, chain_sets(state));
    let base = starts.decisions.as_ref().filter(|_| originals.is_some());
    let points = base.and_then(|(_, base)| Points::number(state, base));
    if points.is_some() {
        body.extend_from_slice(POINTS_BY_NUMBER);
    }
    let json = serde_json::to_vec(state);
    if let Some(originals) = originals {
        chain_sets(state).put_back(originals);
    }
    if let Some(points) = points {
        points.put_back(state);
    }
    body.extend_from_slice(&json?[1..]);
    Ok(body)
}

/// A chain state's points outside its sets: those its steps varied, and each screened one's
/// effect (a gawk screening chain's state names 1,374 of them, twice): written by their
/// number in its start where it holds them all.
struct Points {
    varied: BTreeSet<SiteId>,
    effects: BTreeMap<SiteId, Effect>,
}

impl Points {
    /// Names `state`'s points by their number in `base` where it holds them all: the points
    /// as they were, to put back.
    fn number(state: &mut ChainState, base: &BaseSet) -> Option<Points> {
        let varied = (state.varied.iter())
            .map(|point| base.number_of(point))
            .collect::<Option<_>>()?;
        let effects = base.numbered_keys(&state.effects)?;
        Some(Points {
            varied: std::mem::replace(&mut state.varied, varied),
            effects: std::mem::replace(&mut state.effects, effects),
        })
    }

    fn put_back(self, state: &mut ChainState) {
        (state.varied, state.effects) = (self.varied, self.effects);
    }

    /// Names again the points of a state read as [`Points::number`] wrote them.
    fn name(state: &mut ChainState, base: &BaseSet) -> Result<()> {
        let varied = std::mem::take(&mut state.varied);
        state.varied = (varied.iter())
            .map(|number| base.point_of(number))
            .collect::<Result<_>>()?;
        state.effects = base.named_keys(std::mem::take(&mut state.effects))?;
        Ok(())
    }
}

/// The opening of a stored value whose `sets` are written against `starts`' set where they
/// can be (`{"base":"<hash>",` and `"by_number":true,` where by number), `{` otherwise; and
/// the sets as they were where it wrote them.
fn against_start(starts: &Starts, sets: Sets<'_>) -> (Vec<u8>, Option<Vec<DecisionSet>>) {
    let mut body = b"{".to_vec();
    let Some((hash, base)) = &starts.decisions else {
        return (body, None);
    };
    let Some(written) = base.write(sets) else {
        return (body, None);
    };
    body.extend_from_slice(BASE_OPEN);
    body.extend_from_slice(hash.to_string().as_bytes());
    body.extend_from_slice(BASE_CLOSE);
    if written.by_number {
        body.extend_from_slice(BY_NUMBER);
    }
    (body, Some(written.originals))
}

/// A step's sets that its start rewrites: its decisions, and its diff from its parent.
fn step_sets(record: &mut StepRecord) -> Sets<'_> {
    Sets {
        whole: vec![&mut record.decisions],
        diffs: vec![&mut record.diff],
    }
}

/// A chain state's sets that its start rewrites: where it is, its best, its pending
/// proposals' sets and their diffs.
fn chain_sets(state: &mut ChainState) -> Sets<'_> {
    let mut sets = Sets {
        whole: vec![&mut state.current.decisions, &mut state.best.decisions],
        diffs: Vec::new(),
    };
    for proposal in state.pending.values_mut() {
        sets.whole.push(&mut proposal.decisions);
        sets.diffs.push(&mut proposal.diff);
    }
    sets
}

/// A stored step's header, read from the fields before its record's.
fn header(value: &[u8]) -> Result<Header> {
    let mut fields = checksum::fields(value);
    let mut header = Header::default();
    if let Some(rest) = fields.strip_prefix(BASE_OPEN) {
        let (hash, after) = base_hash(rest)?;
        (header.base, fields) = (Some(hash), after);
        if let Some(after) = fields.strip_prefix(BY_NUMBER) {
            (header.by_number, fields) = (true, after);
        }
        if let Some(after) = fields.strip_prefix(POINTS_BY_NUMBER) {
            (header.points_by_number, fields) = (true, after);
        }
    }
    if let Some(rest) = fields.strip_prefix(PROFILE_OPEN) {
        let mut read = serde_json::Deserializer::from_slice(rest).into_iter::<ProfileDelta>();
        let delta = read
            .next()
            .context("a stored step names no reference profile")?;
        header.profile = Some(delta.context("a stored step names its reference profile badly")?);
        fields = rest[read.byte_offset()..]
            .strip_prefix(b",")
            .context("a stored step's reference profile is not followed by its fields")?;
    }
    header.summary_of_runs = fields.starts_with(SUMMARY_OF_RUNS);
    Ok(header)
}

/// The hash of a step's base set, at the start of `rest`, and what follows it.
fn base_hash(rest: &[u8]) -> Result<(ContentHash, &[u8])> {
    let (digits, after) = rest
        .split_at_checked(HASH_DIGITS)
        .and_then(|(digits, after)| Some((digits, after.strip_prefix(BASE_CLOSE)?)))
        .context("a stored step names its base set badly")?;
    let hash = ContentHash::try_from(String::from_utf8_lossy(digits).into_owned())
        .map_err(|e| anyhow::anyhow!("a stored step names its base set badly: {e}"))?;
    Ok((hash, after))
}

impl Store {
    /// What `experiment`'s steps are written against now: its start set and
    /// reference profile, added to `batch` where the store does not hold them yet.
    pub(super) fn starts_for(&self, experiment: &str, batch: &mut sled::Batch) -> Result<Starts> {
        if let Some(known) = lock(&self.bases).of_experiment.get(experiment) {
            return Ok(known.clone());
        }
        let starts = match self.experiment(experiment)? {
            Some(info) => {
                let (starts, keys) = Starts::of(&info)?;
                for (key, value) in keys {
                    if !self.db.contains_key(&key)? {
                        batch.insert(key.as_bytes(), value);
                    }
                }
                starts
            }
            None => Starts::default(),
        };
        lock(&self.bases)
            .of_experiment
            .insert(experiment.to_string(), starts.clone());
        Ok(starts)
    }

    /// A decided step read from its stored value (under `key`).
    pub fn read_step(&self, key: &str, value: &[u8]) -> Result<StepRecord> {
        read(&self.db, &self.bases, key, value)
    }

    /// The chain state stored under `key`, if any.
    pub(super) fn read_chain(&self, key: &str) -> Result<Option<ChainState>> {
        (self.db.get(key)?)
            .map(|value| read_chain(&self.db, &self.bases, key, &value))
            .transpose()
    }
}

fn lock(bases: &Mutex<Bases>) -> std::sync::MutexGuard<'_, Bases> {
    bases.lock().unwrap_or_else(|p| p.into_inner())
}

/// A stored value's record with its `sets` read back against the base it names, the header
/// before its fields, and that base.
fn against_base<T: serde::de::DeserializeOwned>(
    db: &sled::Db,
    bases: &Mutex<Bases>,
    value: &[u8],
    sets: fn(&mut T) -> Sets<'_>,
) -> Result<(T, Header, Option<Arc<BaseSet>>)> {
    let mut record: T = serde_json::from_slice(value)?;
    let header = header(value)?;
    let Some(hash) = header.base else {
        return Ok((record, header, None));
    };
    let base = base(db, bases, &hash)?;
    base.read(sets(&mut record), header.by_number)?;
    Ok((record, header, Some(base)))
}

/// A decided step read from its stored value (under `key`) in `db`, the sets
/// and profiles it names read through `bases`.
pub(super) fn read(
    db: &sled::Db,
    bases: &Mutex<Bases>,
    key: &str,
    value: &[u8],
) -> Result<StepRecord> {
    let unreadable = || format!("store key {key} holds unreadable data");
    let (mut record, header, _) =
        against_base(db, bases, value, step_sets).with_context(unreadable)?;
    if let Some(delta) = header.profile {
        let base = profile(db, bases, &delta.of).with_context(unreadable)?;
        profile::add(&mut record, &base, delta);
    }
    if header.summary_of_runs {
        let m = &mut record.result.measurement;
        m.summary = summarise(&m.runs);
    }
    Ok(record)
}

/// A chain's state read from its stored value (under `key`) in `db`, the set it names
/// read through `bases`.
pub(super) fn read_chain(
    db: &sled::Db,
    bases: &Mutex<Bases>,
    key: &str,
    value: &[u8],
) -> Result<ChainState> {
    let unreadable = || format!("store key {key} holds unreadable data");
    let (mut state, header, base) =
        against_base(db, bases, value, chain_sets).with_context(unreadable)?;
    if let (true, Some(base)) = (header.points_by_number, base) {
        Points::name(&mut state, &base).with_context(unreadable)?;
    }
    Ok(state)
}

/// The base set stored under `hash`.
fn base(db: &sled::Db, bases: &Mutex<Bases>, hash: &ContentHash) -> Result<Arc<BaseSet>> {
    if let Some(set) = lock(bases).by_hash.get(hash) {
        return Ok(set.clone());
    }
    let key = layout::set_key(hash);
    let set: DecisionSet =
        stored(db, &key)?.with_context(|| format!("its base set {key} is missing"))?;
    let set = Arc::new(BaseSet::new(set));
    lock(bases).by_hash.insert(*hash, set.clone());
    Ok(set)
}

/// The reference profile stored under `hash`.
fn profile(db: &sled::Db, bases: &Mutex<Bases>, hash: &ContentHash) -> Result<Arc<Profile>> {
    if let Some(profile) = lock(bases).profiles.get(hash) {
        return Ok(profile.clone());
    }
    let key = layout::profile_key(hash);
    let profile: Profile =
        stored(db, &key)?.with_context(|| format!("its reference profile {key} is missing"))?;
    let profile = Arc::new(profile);
    lock(bases).profiles.insert(*hash, profile.clone());
    Ok(profile)
}

/// The JSON value stored under `key`.
fn stored<T: serde::de::DeserializeOwned>(db: &sled::Db, key: &str) -> Result<Option<T>> {
    match db.get(key)? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("store key {key} holds unreadable data")),
    }
}

/// A store's base cache, empty.
pub(super) fn no_bases() -> Mutex<Bases> {
    Mutex::new(Bases::default())
}
