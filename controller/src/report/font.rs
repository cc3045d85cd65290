//! The plots' font: a TrueType file read at run time, so no fontconfig is needed.

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::Result;
use plotters::style::FontStyle;

/// Fonts tried for the plots' text, after `$KILN_FONT`.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// The font family every text of the plots uses.
pub(super) const FAMILY: &str = "sans-serif";

/// Registers a TrueType font for the plots' text, once per process.
pub(super) fn ensure_font() -> Result<()> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let env = std::env::var_os("KILN_FONT").map(PathBuf::from);
        let path = match &env {
            Some(p) => p.clone(),
            None => FONT_PATHS
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
                .ok_or_else(|| {
                    "no font for the report's text: install fonts-dejavu-core (Debian, Ubuntu) \
                     or set KILN_FONT to a .ttf file"
                        .to_string()
                })?,
        };
        let bytes = std::fs::read(&path)
            .map_err(|e| format!("cannot read font {}: {e}", path.display()))?;
        // plotters keeps registered fonts for the whole process: leaking the
        // one font read per process is what its 'static API asks for.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a usable TrueType font", path.display()))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}
