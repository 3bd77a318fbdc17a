//! Decompressing a segment one zstd block at a time.
//!
//! The zstd frame and block headers are walked by hand and each unit (a frame header, one
//! block, a checksum) is fed to the decoder on its own. A damaged block then costs only that
//! block: everything decoded before it is kept (a plain streaming read would drop the output of
//! the whole read call that hit the error). It also tells a stream cut at a frame boundary
//! (complete) from one cut inside a frame (truncated: the writer never finished the frame).
//!
//! Input that ends inside a unit is kept: when the source grows (a segment still being written,
//! read by `journal::tail`), the next [`BlockDecoder::step`] goes on from the same byte, so a
//! unit is only ever decoded whole.

use std::io::{self, BufReader, Read};

use zstd::stream::raw::{DParameter, Decoder, InBuffer, Operation, OutBuffer};

/// Largest zstd window accepted (2^24 = 16 MiB); the writer's level 1 uses 512 KiB
/// (level 3, before, 2 MiB).
const WINDOW_LOG_MAX: u32 = 24;
const ZSTD_MAGIC: u32 = 0xFD2F_B528;

/// What one step of decoding produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Decompressed bytes were appended (possibly none, for header units).
    Data,
    /// The input ended at a frame boundary.
    Complete,
    /// The input ended inside a frame.
    Truncated,
    /// The input is not valid zstd from here on.
    Damaged(String),
}

enum State {
    FrameStart,
    Blocks {
        checksum: bool,
    },
    Checksum,
    /// Inside a skippable frame: this many content bytes remain to be skipped.
    Skip(u64),
}

/// A block-at-a-time zstd decoder over a byte source.
pub(crate) struct BlockDecoder<R: Read> {
    inner: BufReader<R>,
    decoder: Decoder<'static>,
    state: State,
    frames: u64,
    unit: Vec<u8>,
    /// `unit` holds the start of a unit whose input ended early: kept for the next step.
    partial: bool,
    /// Compressed bytes read so far (skipped content excluded).
    read: u64,
}

enum Take {
    Full,
    Empty,
    Short,
}

impl<R: Read> BlockDecoder<R> {
    pub(crate) fn new(inner: R) -> io::Result<Self> {
        let mut decoder = Decoder::new()?;
        decoder.set_parameter(DParameter::WindowLogMax(WINDOW_LOG_MAX))?;
        Ok(BlockDecoder {
            inner: BufReader::with_capacity(64 * 1024, inner),
            decoder,
            state: State::FrameStart,
            frames: 0,
            unit: Vec::with_capacity(256 * 1024),
            partial: false,
            read: 0,
        })
    }

    /// Frames begun so far.
    pub(crate) fn frames(&self) -> u64 {
        self.frames
    }

    /// Compressed bytes of zstd frames read so far (the content of skippable frames excluded).
    pub(crate) fn compressed_bytes(&self) -> u64 {
        self.read
    }

    /// Read input until the current unit holds `total` bytes (or the input ends).
    fn take(&mut self, total: usize) -> io::Result<Take> {
        let start = self.unit.len();
        if start >= total {
            return Ok(Take::Full);
        }
        self.unit.resize(total, 0);
        let mut got = 0;
        while start + got < total {
            match self.inner.read(&mut self.unit[start + got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.unit.truncate(start + got);
                    self.read += got as u64;
                    return Err(e);
                }
            }
        }
        self.unit.truncate(start + got);
        self.read += got as u64;
        Ok(match self.unit.len() {
            n if n == total => Take::Full,
            0 => Take::Empty,
            _ => Take::Short,
        })
    }

    /// Decode the next unit, appending its output to `out`.
    pub(crate) fn step(&mut self, out: &mut Vec<u8>) -> Step {
        match self.read_unit() {
            Ok(None) => self.feed(out),
            Ok(Some(end)) => end,
            Err(e) => Step::Damaged(e.to_string()),
        }
    }

    /// Read the next unit into `self.unit`; `Some(step)` when the input ended or is bad. A unit
    /// cut short stays in `self.unit`, to be completed by the next call.
    fn read_unit(&mut self) -> io::Result<Option<Step>> {
        if !std::mem::take(&mut self.partial) {
            self.unit.clear();
        }
        let result = self.read_whole_unit();
        if let Ok(Some(Step::Truncated)) = result {
            self.partial = !self.unit.is_empty();
        }
        result
    }

    fn read_whole_unit(&mut self) -> io::Result<Option<Step>> {
        match self.state {
            State::FrameStart => {
                match self.take(4)? {
                    Take::Empty => return Ok(Some(Step::Complete)),
                    Take::Short => return Ok(Some(Step::Truncated)),
                    Take::Full => {}
                }
                let magic = u32::from_le_bytes(self.unit[..4].try_into().expect("4 bytes"));
                if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
                    // A skippable frame: its size, then content we do not need.
                    if !matches!(self.take(8)?, Take::Full) {
                        return Ok(Some(Step::Truncated));
                    }
                    let size = u32::from_le_bytes(self.unit[4..8].try_into().expect("4 bytes"));
                    self.unit.clear();
                    self.state = State::Skip(u64::from(size));
                    return self.skip();
                }
                if magic != ZSTD_MAGIC {
                    return Ok(Some(Step::Damaged(format!(
                        "no zstd frame here (magic {magic:08x})"
                    ))));
                }
                if !matches!(self.take(5)?, Take::Full) {
                    return Ok(Some(Step::Truncated));
                }
                let fhd = self.unit[4];
                let single_segment = fhd & 0x20 != 0;
                let checksum = fhd & 0x04 != 0;
                let dict_id = [0, 1, 2, 4][usize::from(fhd & 0x03)];
                let content_size = match fhd >> 6 {
                    0 => usize::from(single_segment),
                    1 => 2,
                    2 => 4,
                    _ => 8,
                };
                let rest = usize::from(!single_segment) + dict_id + content_size;
                if !matches!(self.take(5 + rest)?, Take::Full) {
                    return Ok(Some(Step::Truncated));
                }
                if self.frames > 0 {
                    self.decoder.reinit()?;
                }
                self.frames += 1;
                self.state = State::Blocks { checksum };
            }
            State::Blocks { checksum } => {
                match self.take(3)? {
                    Take::Full => {}
                    _ => return Ok(Some(Step::Truncated)),
                }
                let header = u32::from(self.unit[0])
                    | u32::from(self.unit[1]) << 8
                    | u32::from(self.unit[2]) << 16;
                let last = header & 1 != 0;
                let size = (header >> 3) as usize;
                let content = match (header >> 1) & 3 {
                    0 | 2 => size,
                    1 => 1,
                    _ => return Ok(Some(Step::Damaged("reserved zstd block type".into()))),
                };
                if size > 128 * 1024 {
                    return Ok(Some(Step::Damaged(format!(
                        "zstd block of {size} bytes is over the 128 KiB limit"
                    ))));
                }
                if !matches!(self.take(3 + content)?, Take::Full) {
                    return Ok(Some(Step::Truncated));
                }
                if last {
                    self.state = if checksum {
                        State::Checksum
                    } else {
                        State::FrameStart
                    };
                }
            }
            State::Checksum => {
                if !matches!(self.take(4)?, Take::Full) {
                    return Ok(Some(Step::Truncated));
                }
                self.state = State::FrameStart;
            }
            State::Skip(_) => return self.skip(),
        }
        Ok(None)
    }

    /// Skip what remains of a skippable frame's content.
    fn skip(&mut self) -> io::Result<Option<Step>> {
        let State::Skip(remaining) = self.state else {
            return Ok(None);
        };
        let skipped = io::copy(&mut (&mut self.inner).take(remaining), &mut io::sink())?;
        if skipped < remaining {
            self.state = State::Skip(remaining - skipped);
            return Ok(Some(Step::Truncated));
        }
        self.state = State::FrameStart;
        Ok(None)
    }

    /// Feed the unit to the decoder.
    fn feed(&mut self, out: &mut Vec<u8>) -> Step {
        let mut input = InBuffer::around(&self.unit);
        loop {
            if out.capacity() - out.len() < 256 * 1024 {
                out.reserve(256 * 1024);
            }
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            if let Err(e) = self.decoder.run(&mut input, &mut output) {
                return Step::Damaged(e.to_string());
            }
            let produced = output.pos() > pos;
            if input.pos() == self.unit.len() && !produced {
                return Step::Data;
            }
        }
    }
}
