//! The text of a PDF, a line of text for each line on the page. lopdf reads the file (cross
//! references, filters, decryption, fonts and their ToUnicode maps); the lines are found here,
//! from where the text is placed, because lopdf's own `extract_text` ends a line only where a
//! text object ends, and many PDFs put a whole page in one.

use std::collections::BTreeMap;

use lopdf::content::Content;
use lopdf::{Document, Encoding, Object};

use crate::documents::DocumentError;

/// Decompressed content read at most for one page (or font): a page of text is a few hundred
/// kilobytes, and a small stream that inflates to gigabytes is an attack, not a document.
const MAX_PAGE_CONTENT: usize = 64 * 1024 * 1024;
/// A move right inside a `TJ` array wider than this (in thousandths of the font size) is a
/// space between words; kerning inside a word is much smaller.
const WORD_GAP: f32 = 200.0;

/// `[a b c d e f]`, a PDF transformation matrix.
type Matrix = [f32; 6];
const IDENTITY: Matrix = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0];

pub fn pdf_text(bytes: &[u8]) -> Result<String, DocumentError> {
    let damaged = |source| DocumentError::PdfDamaged { source };
    let doc = Document::load_mem(bytes).map_err(damaged)?;
    // lopdf opens a PDF whose user password is empty itself (the common "no copying" kind) and
    // then drops its /Encrypt; one still marked encrypted needs a password nobody gave.
    if doc.is_encrypted() {
        return Err(DocumentError::PdfEncrypted);
    }
    let mut pages = Vec::new();
    for page in doc.page_iter() {
        let encodings: BTreeMap<Vec<u8>, Encoding> = doc
            .get_page_fonts(page)
            .map_err(damaged)?
            .into_iter()
            // Text in a font whose encoding cannot be read is left out, the rest of the page
            // is still worth having.
            .filter_map(|(name, font)| {
                font.get_font_encoding_with_limit(&doc, MAX_PAGE_CONTENT)
                    .ok()
                    .map(|encoding| (name, encoding))
            })
            .collect();
        let content = doc
            .get_page_content_with_limit(page, MAX_PAGE_CONTENT)
            .map_err(damaged)?;
        let content = Content::decode(&content).map_err(damaged)?;
        pages.push(page_text(&content, &encodings));
    }
    let text = pages
        .join("\n\n")
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n");
    if text.trim().is_empty() {
        return Err(DocumentError::PdfWithoutText);
    }
    Ok(without_ligatures(&text))
}

/// The text a page shows, in the order it is drawn: a new line where the text moves up or down
/// by more than half its size, a space where it moves along the same line.
fn page_text(content: &Content, encodings: &BTreeMap<Vec<u8>, Encoding>) -> String {
    let mut page = PageState::default();
    let mut encoding = None;
    for operation in &content.operations {
        let number = |i: usize| {
            operation
                .operands
                .get(i)
                .and_then(|o| o.as_float().ok())
                .unwrap_or(0.0)
        };
        let matrix = || std::array::from_fn(number);
        match operation.operator.as_str() {
            "q" => page.saved.push(page.ctm),
            "Q" => page.ctm = page.saved.pop().unwrap_or(IDENTITY),
            "cm" => page.ctm = multiply(&matrix(), &page.ctm),
            "BT" => {
                page.tm = IDENTITY;
                page.tlm = IDENTITY;
            }
            "Tf" => {
                encoding = operation
                    .operands
                    .first()
                    .and_then(|o| o.as_name().ok())
                    .and_then(|name| encodings.get(name));
                page.size = number(1);
            }
            "TL" => page.leading = number(0),
            "Td" => page.move_line(number(0), number(1)),
            "TD" => {
                page.leading = -number(1);
                page.move_line(number(0), number(1));
            }
            "Tm" => {
                page.tlm = matrix();
                page.tm = page.tlm;
            }
            "T*" => page.next_line(),
            "Tj" | "TJ" => {
                if let (Some(encoding), Some(shown)) = (encoding, operation.operands.first()) {
                    page.show(encoding, shown);
                }
            }
            "'" => {
                page.next_line();
                if let (Some(encoding), Some(shown)) = (encoding, operation.operands.first()) {
                    page.show(encoding, shown);
                }
            }
            "\"" => {
                page.next_line();
                if let (Some(encoding), Some(shown)) = (encoding, operation.operands.get(2)) {
                    page.show(encoding, shown);
                }
            }
            _ => {}
        }
    }
    page.text
}

/// What the text operators of one page have set so far (PDF 32000-1, 9.3 and 9.4).
struct PageState {
    text: String,
    /// The current transformation matrix and those saved by `q`.
    ctm: Matrix,
    saved: Vec<Matrix>,
    /// The text matrix and the text line matrix.
    tm: Matrix,
    tlm: Matrix,
    leading: f32,
    size: f32,
    /// Where on the page the text shown last began.
    last: Option<(f32, f32)>,
}

impl Default for PageState {
    fn default() -> Self {
        Self {
            text: String::new(),
            ctm: IDENTITY,
            saved: Vec::new(),
            tm: IDENTITY,
            tlm: IDENTITY,
            leading: 0.0,
            size: 0.0,
            last: None,
        }
    }
}

impl PageState {
    fn move_line(&mut self, tx: f32, ty: f32) {
        self.tlm = multiply(&[1.0, 0.0, 0.0, 1.0, tx, ty], &self.tlm);
        self.tm = self.tlm;
    }

    fn next_line(&mut self) {
        self.move_line(0.0, -self.leading);
    }

    /// The string or `TJ` array `shown`. The glyphs' widths are not read, so where a string
    /// ends is not known: text placed anew on the same line is taken for a new word, and text
    /// that follows without a move for the same word.
    fn show(&mut self, encoding: &Encoding, shown: &Object) {
        let on_page = multiply(&self.tm, &self.ctm);
        let (x, y) = (on_page[4], on_page[5]);
        let height = (self.size * on_page[2].hypot(on_page[3])).abs().max(1.0);
        match self.last {
            Some((_, last_y)) if (y - last_y).abs() > height / 2.0 => self.text.push('\n'),
            Some((last_x, _)) if x != last_x && !self.text.ends_with(char::is_whitespace) => {
                self.text.push(' ');
            }
            Some(_) | None => {}
        }
        self.last = Some((x, y));
        let strings = match shown {
            Object::Array(items) => items.as_slice(),
            other => std::slice::from_ref(other),
        };
        for item in strings {
            match item {
                Object::String(bytes, _) => {
                    // Bytes the font's encoding cannot map are left out, as a reader would.
                    let _ = encoding.write_to_string(bytes, &mut self.text);
                }
                Object::Integer(_) | Object::Real(_) => {
                    let gap = -item.as_float().unwrap_or(0.0);
                    if gap > WORD_GAP && !self.text.ends_with(char::is_whitespace) {
                        self.text.push(' ');
                    }
                }
                _ => {}
            }
        }
    }
}

/// `a` then `b`.
fn multiply(a: &Matrix, b: &Matrix) -> Matrix {
    [
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
        a[4] * b[0] + a[5] * b[2] + b[4],
        a[4] * b[1] + a[5] * b[3] + b[5],
    ]
}

/// Typeset ligatures as their letters: the search tokenizer takes `ﬁ` for a letter of its own,
/// so "speciﬁcation" would not match "specification".
fn without_ligatures(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB05}' | '\u{FB06}' => out.push_str("st"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lopdf::{Stream, dictionary};
    use pretty_assertions::assert_eq;

    /// A PDF of pages with these contents, in Helvetica as `/F1` (Windows encoding, and `fi` at
    /// 128).
    fn pdf(pages: &[&str]) -> Document {
        let mut doc = Document::with_version("1.7");
        let pages_id = doc.new_object_id();
        let font = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
            "Encoding" => dictionary! {
                "BaseEncoding" => "WinAnsiEncoding",
                "Differences" => vec![128.into(), Object::Name(b"fi".to_vec())],
            },
        });
        let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
        let kids: Vec<Object> = pages
            .iter()
            .map(|content| {
                let content = doc.add_object(Stream::new(dictionary! {}, content.as_bytes().to_vec()));
                doc.add_object(dictionary! {
                    "Type" => "Page", "Parent" => pages_id, "Contents" => content,
                    "Resources" => resources, "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
                })
                .into()
            })
            .collect();
        let count = kids.len() as i64;
        doc.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count }),
        );
        let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
        doc.trailer.set("Root", catalog);
        doc
    }

    fn bytes(mut doc: Document) -> Vec<u8> {
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap();
        out
    }

    #[test]
    fn lines_are_where_the_text_moves_down_and_words_where_it_moves_along() {
        let page_one = "BT /F1 12 Tf 72 700 Td (Dentist) Tj ( appointment) Tj \
             0 -14 Td [(Tues) -20 (day at) -300 (9:30)] TJ 14 TL T* (Bring the card.) Tj ET \
             BT /F1 12 Tf 72 600 Td (Left) Tj 100 0 Td (Right) Tj ET \
             q 1 0 0 1 0 -100 cm BT /F1 12 Tf 72 600 Td (Moved by cm) Tj ET Q";
        let page_two = "BT /F1 10 Tf 1 0 0 1 72 700 Tm (Second page) Tj \
             1 0 0 1 72 690 Tm (Zo\\353 \\200les the claims) Tj ET";
        assert_eq!(
            pdf_text(&bytes(pdf(&[page_one, page_two]))).unwrap(),
            "Dentist appointment\nTuesday at 9:30\nBring the card.\nLeft Right\nMoved by cm\n\n\
             Second page\nZoë files the claims"
        );
    }

    #[test]
    fn a_pdf_without_a_password_to_open_it_is_read_and_one_with_is_refused() {
        let encrypted = |user_password: &str| {
            let mut doc = pdf(&["BT /F1 12 Tf 72 700 Td (Kept safe) Tj ET"]);
            doc.trailer
                .set("ID", vec![Object::string_literal("0123456789abcdef"); 2]);
            let state = lopdf::EncryptionState::try_from(lopdf::EncryptionVersion::V2 {
                document: &doc,
                owner_password: "owner",
                user_password,
                key_length: 128,
                permissions: lopdf::Permissions::all(),
            })
            .unwrap();
            doc.encrypt(&state).unwrap();
            bytes(doc)
        };
        assert_eq!(pdf_text(&encrypted("")).unwrap(), "Kept safe");
        assert!(matches!(
            pdf_text(&encrypted("secret")),
            Err(DocumentError::PdfEncrypted)
        ));
    }

    #[test]
    fn a_scan_has_no_text_and_a_damaged_file_says_why() {
        let drawing = "q 0 0 1 rg 72 72 300 400 re f Q";
        assert!(matches!(
            pdf_text(&bytes(pdf(&[drawing]))),
            Err(DocumentError::PdfWithoutText)
        ));
        let whole = bytes(pdf(&["BT /F1 12 Tf 72 700 Td (Cut) Tj ET"]));
        let err = pdf_text(&whole[..whole.len() / 2]).unwrap_err();
        assert!(matches!(err, DocumentError::PdfDamaged { .. }), "{err}");
        let err = pdf_text(b"<html>not a PDF</html>").unwrap_err();
        assert!(matches!(err, DocumentError::PdfDamaged { .. }), "{err}");
    }
}
