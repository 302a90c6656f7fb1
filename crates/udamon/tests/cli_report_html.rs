//! `report html`: one self-contained page whose numbers are the text reports', which draws,
//! zooms and loads nothing in a real browser (headless Chromium, when installed).

mod common;

use common::screen::{self, chromium};
use common::*;
use regex::Regex;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A live record with mappings and samples: the static pattern for 3 s.
fn live_record(dir: &Path) -> PathBuf {
    let out = dir.join("live.data");
    udamon()
        .args(["record", "--access-source", "cpuclock", "-o"])
        .arg(&out)
        .arg("--")
        .arg(patterns())
        .args(["static", "-t", "3", "-o", "/dev/null"])
        .assert()
        .success();
    out
}

/// `report html RECORD -o PAGE`; the page's text.
fn page(record: &Path) -> (PathBuf, String) {
    let out = record.with_extension("html");
    udamon()
        .args(["report", "html"])
        .arg(record)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).unwrap();
    (out, text)
}

fn unescape(html: &str) -> String {
    html.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The page's text reports (`<pre class="report">`), in order.
fn pres(html: &str) -> Vec<String> {
    Regex::new(r#"(?s)<pre class="report">(.*?)</pre>"#)
        .unwrap()
        .captures_iter(html)
        .map(|c| unescape(&c[1]))
        .collect()
}

/// The rows of the page's table of `class`, each as its cells' words.
fn table(html: &str, class: &str) -> Vec<Vec<String>> {
    let body = Regex::new(&format!(
        r#"(?s)<table class="{class}">.*?<tbody>(.*?)</tbody>"#
    ))
    .unwrap()
    .captures(html)
    .unwrap_or_else(|| panic!("no {class} table"))[1]
        .to_string();
    let cell = Regex::new(r"(?s)<td[^>]*>(.*?)</td>").unwrap();
    body.split("<tr>")
        .skip(1)
        .map(|row| cell.captures_iter(row).map(|c| unescape(&c[1])).collect())
        .collect()
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn the_page_holds_every_panel_and_names_nothing_outside_itself() {
    let dir = tempfile::tempdir().unwrap();
    let record = sim_record(
        dir.path(),
        "demo.data",
        "builtin:demo",
        &["--duration", "6s"],
    );
    let (_, html) = page(&record);
    for id in [
        "heatmap",
        "wss",
        "footprints",
        "mappings",
        "code",
        "schemes",
        "info",
    ] {
        assert!(html.contains(&format!("<section id=\"{id}\">")), "no {id}");
    }
    // The browser may load nothing: the policy says so, and nothing asks.
    assert!(html.contains("content=\"default-src 'none';"), "no policy");
    let refs = Regex::new(r#"(?i)\b(src|href|action)\s*=\s*"([^"]*)""#).unwrap();
    for r in refs.captures_iter(&html) {
        assert!(
            r[2].starts_with('#') || r[2].starts_with("data:"),
            "{} points outside the page: {}",
            &r[1],
            &r[2]
        );
    }
    for outside in [
        "<link",
        "@import",
        "url(",
        "fetch(",
        "XMLHttpRequest",
        "<iframe",
    ] {
        assert!(!html.contains(outside), "the page holds {outside}");
    }
    // A record without mappings, samples or schemes says what it lacks.
    assert!(html.contains("The record holds no mappings"));
    assert!(html.contains("No scheme ran in this record"));
}

#[test]
fn every_number_on_the_page_is_the_text_reports() {
    let dir = tempfile::tempdir().unwrap();
    let record = live_record(dir.path());
    let (_, html) = page(&record);
    let shown = pres(&html);
    // `--horizons` takes any number of values: the record goes before it.
    let out = udamon()
        .args(["report", "wss"])
        .arg(&record)
        .arg("--horizons")
        .output()
        .unwrap();
    let curve = String::from_utf8(out.stdout).unwrap();
    assert!(
        shown.contains(&curve),
        "the working set by horizon is not on the page:\n{curve}"
    );
    for (args, what) in [
        (vec!["wss"], "the working set"),
        (vec!["footprints"], "the footprints"),
        (vec!["info"], "the record's info"),
    ] {
        let text = report_text(&args, &record);
        assert!(shown.contains(&text), "{what} is not on the page:\n{text}");
    }

    // Mappings: the text report's rows, each under its target.
    let rows = table(&html, "mappings");
    assert!(!rows.is_empty());
    let text = report_text(&["mappings"], &record);
    let text_rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("address range"))
        .map(words)
        .collect();
    let page_rows: Vec<Vec<String>> = rows.iter().map(|r| words(&r[1..].join(" "))).collect();
    assert_eq!(page_rows, text_rows);

    // Code: the text report's function rows.
    let rows = table(&html, "code");
    let text = report_text(&["code"], &record);
    let text_rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(words)
        .collect();
    let page_rows: Vec<Vec<String>> = rows.iter().map(|r| words(&r.join(" "))).collect();
    assert!(!page_rows.is_empty());
    assert_eq!(page_rows, text_rows);
    let code = report_json(&["code"], &record);
    assert!(html.contains(&format!(
        "{} of the record's {} samples",
        code["samples"], code["samples_recorded"]
    )));
}

/// The browser window the page is checked in, and its screenshot taken: a laptop's.
const WINDOW: (u32, u32) = (1400, 1800);

/// Chromium's run of the page's own check (`#selftest`) in a [`WINDOW`]: what it drew, did and
/// loaded.
fn selftest(page: &Path) -> Value {
    let url = format!("file://{}#selftest", page.display());
    let size = format!("--window-size={},{}", WINDOW.0, WINDOW.1);
    let out = screen::run_chromium(&url, &[&size, "--dump-dom"]);
    let dom = String::from_utf8(out.stdout).unwrap();
    let found = Regex::new(r#"(?s)<pre id="selftest"[^>]*>(.*?)</pre>"#)
        .unwrap()
        .captures(&dom)
        .unwrap_or_else(|| panic!("no selftest in the DOM:\n{dom}"))[1]
        .to_string();
    serde_json::from_str(&unescape(&found))
        .unwrap_or_else(|e| panic!("the selftest wrote {found}: {e}"))
}

#[test]
fn in_chromium_the_page_draws_zooms_hovers_and_loads_nothing() {
    if let Err(why) = chromium() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let record = live_record(dir.path());
    let (page, _) = page(&record);
    let result = selftest(&page);
    let panels: Vec<&str> = result["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        panels,
        [
            "heatmap",
            "wss",
            "footprints",
            "mappings",
            "code",
            "schemes",
            "info"
        ]
    );
    assert!(result["colours"].as_u64().unwrap() > 10, "{result}");
    assert_eq!(result["zoom_changed"], true, "the wheel zooms: {result}");
    assert!(result["view"]["x1"].as_f64().unwrap() - result["view"]["x0"].as_f64().unwrap() < 1.0);
    assert_eq!(result["resources"], 0, "nothing loaded: {result}");
    assert_eq!(result["violations"], Value::Array(vec![]), "{result}");
    assert_eq!(
        result["clipped"],
        Value::Array(vec![]),
        "no table cut: {result}"
    );

    // Hovering tells each region of a window as `report access` prints it.
    let window = result["window"].as_u64().unwrap().to_string();
    let text = report_text(&["access", "--snapshot", &window], &record);
    let rows: Vec<String> = text
        .lines()
        .filter(|l| {
            !["#", "total", "memory", "touched"]
                .iter()
                .any(|summary| l.starts_with(summary))
        })
        .skip(1)
        .map(|l| words(l).join(" "))
        .collect();
    let described = result["described"].as_array().unwrap();
    assert_eq!(described.len(), rows.len(), "{text}");
    for (d, row) in described.iter().zip(&rows) {
        let shown = format!(
            "{} {} {} {} {} {}",
            d["index"],
            d["range"].as_str().unwrap(),
            d["size"].as_str().unwrap(),
            d["access"].as_str().unwrap(),
            d["hz"].as_str().unwrap(),
            d["age"].as_str().unwrap()
        );
        assert!(
            row.starts_with(&shown),
            "the page says {shown}, the report {row}"
        );
    }

    let png = dir.path().join("page.png");
    screen::screenshot(&format!("file://{}", page.display()), &png, WINDOW);
    assert!(screen::colours(&png) > 50, "a blank screenshot");
    screen::keep_for_docs(&png, "report-html.png");
}

/// A mapping's long name is shown whole, wrapped, and the mappings table fits the page: the
/// names were cut, and the table with them at 1400 px, the file's name out of sight.
#[test]
fn in_chromium_long_mapping_names_wrap_and_no_table_is_cut() {
    if let Err(why) = chromium() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let long = (0..4).fold(dir.path().to_path_buf(), |d, i| {
        d.join(format!(
            "a-directory-with-a-long-name-as-builds-make-them-{i}"
        ))
    });
    std::fs::create_dir_all(&long).unwrap();
    let program = long.join("the-workload-under-a-long-file-name-as-well");
    std::fs::copy(patterns(), &program).unwrap();
    let record = dir.path().join("long.data");
    udamon()
        .args(["record", "-o"])
        .arg(&record)
        .arg("--")
        .arg(&program)
        .args(["static", "-t", "1", "-o", "/dev/null"])
        .assert()
        .success();
    let (page, html) = page(&record);
    let names = table(&html, "mappings")
        .into_iter()
        .filter_map(|row| row.last().cloned())
        .collect::<Vec<_>>();
    let name = program.to_str().unwrap();
    assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    let result = selftest(&page);
    assert_eq!(
        result["clipped"],
        Value::Array(vec![]),
        "no table cut: {result}"
    );
}

#[test]
fn json_is_refused_rather_than_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("sim.data");
    udamon()
        .args(["record", "--sim", "builtin:demo", "--duration", "1s", "-o"])
        .arg(&rec)
        .assert()
        .success();
    let out = udamon()
        .args(["report", "html", "--json"])
        .arg(&rec)
        .assert()
        .failure()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("drop --json"), "{stderr}");
    assert!(
        !rec.with_extension("html").exists(),
        "no page written when refused"
    );
}

/// A command line (anyone's, under `--cgroup`) holding `<!--<script>` cannot end or extend the
/// page's data block, which would keep the page's own script from running.
#[test]
fn markup_in_a_recorded_string_stays_inside_the_pages_data() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("markup.data");
    let planted = "<!--<script></script>-->";
    udamon()
        .args(["record", "-o"])
        .arg(&rec)
        .args(["--", "sh", "-c", "sleep 0.5", planted])
        .assert()
        .success();
    let (_, html) = page(&rec);
    let open = r#"<script type="application/json" id="udamon-data">"#;
    let start = html.find(open).expect("a data block") + open.len();
    let block = &html[start..start + html[start..].find("</script>").unwrap()];
    assert!(!block.contains('<'), "markup inside the data block");
    let data: Value = serde_json::from_str(block).unwrap();
    assert!(data.to_string().contains(planted), "the string is kept");
}
