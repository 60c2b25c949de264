//! The pages' style sheet and scripts (inline, allowed by the per-response CSP nonce).

pub(crate) const CSS: &str = r#"
:root{color-scheme:light dark;--fg:#1f2328;--muted:#59636e;--bg:#f6f8fa;--card:#fff;--border:#d1d9e0;--code:#f6f8fa}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9198a1;--bg:#0d1117;--card:#151b23;--border:#3d444d;--code:#0d1117}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:980px;margin:0 auto;padding:12px 16px 40px}
header.top{display:flex;justify-content:space-between;align-items:center;gap:12px;flex-wrap:wrap;border-bottom:1px solid var(--border);padding-bottom:8px}
h1{font-size:19px;margin:6px 0}h2{font-size:16px;margin:22px 0 6px}
a{color:#0969da;text-underline-offset:3px}
.mono,.tool,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
.approval{background:var(--card);border:1px solid var(--border);border-radius:8px;padding:10px 14px;margin:10px 0}
.approval h3{margin:0 0 4px;font-size:16px;display:flex;gap:10px;flex-wrap:wrap;align-items:baseline}
.grant,.meta,.muted{color:var(--muted);font-size:13px}
.reason{margin:4px 0}
.upstream{margin:2px 0;font-size:13px;overflow-wrap:anywhere}
pre.arguments{font-size:13px;line-height:1.4;background:var(--code);border:1px solid var(--border);border-radius:6px;padding:8px 10px;margin:6px 0;white-space:pre-wrap;overflow-wrap:anywhere}
.warning{margin:4px 0}.badge{display:inline-block;background:#fff8c5;color:#6f4e00;border:1px solid #d4a72c;border-radius:6px;padding:2px 8px;font-size:13px}
.truncated{font-size:13px;margin:2px 0 6px}
button:disabled{opacity:.4;cursor:not-allowed;filter:grayscale(.7)}
html.hold form.decide button{pointer-events:none;opacity:.45}
form.decide{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin-top:8px}
input[type=text],input[type=password]{font:inherit;padding:6px 8px;border:1px solid var(--border);border-radius:6px;background:var(--card);color:var(--fg)}
form.decide input[name=note]{flex:1;min-width:14em}
button{font:inherit;font-weight:600;padding:6px 16px;border-radius:6px;border:1px solid var(--border);cursor:pointer;background:var(--card);color:var(--fg)}
button.approve{background:#1f883d;border-color:#1a7f37;color:#fff}
button.deny{background:#cf222e;border-color:#a40e26;color:#fff}
.flash{background:#ddf4ff;color:#0a3069;border:1px solid #54aeff;padding:8px 12px;border-radius:6px;margin:10px 0}
.error{background:#ffebe9;color:#82071e;border:1px solid #ff8182;padding:8px 12px;border-radius:6px;margin:10px 0}
table{width:100%;border-collapse:collapse;font-size:13px}
th,td{border-bottom:1px solid var(--border);padding:5px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
.state{font-weight:600}.state-consumed,.state-approved{color:#1a7f37}.state-denied{color:#cf222e}.state-expired{color:var(--muted)}.state-pending{color:#9a6700}
form.login{display:grid;gap:10px;max-width:360px;margin-top:16px}
"#;

/// Keeps the decision buttons disabled (dimmed) for 1.5 s after every page load, so a click aimed
/// before a reload cannot land on another card's button; reloads when `/ui/version` changes,
/// unless a note is being typed. Without script the buttons are enabled. Each form starts with a
/// hidden, always-disabled submit button: it is the form's default button, so Enter in the note
/// field submits nothing (it would otherwise press Approve).
pub(crate) const SCRIPT: &str = r#"(function(){
var b=document.querySelectorAll('form.decide button:not(.no-enter)');
function hold(){for(var i=0;i<b.length;i++)b[i].disabled=true;
setTimeout(function(){for(var i=0;i<b.length;i++)b[i].disabled=false;},1500);}
hold();window.addEventListener('pageshow',function(e){if(e.persisted)hold();});
var v=document.body.getAttribute('data-version');if(!v)return;
function typing(){var n=document.querySelectorAll('input[name=note]');for(var i=0;i<n.length;i++){if(n[i]===document.activeElement||n[i].value!=='')return true;}return false;}
setInterval(function(){if(typing())return;
fetch('/ui/version',{credentials:'same-origin',cache:'no-store'}).then(function(r){if(r.status===401){location.reload();return null;}return r.ok?r.text():null;})
.then(function(t){if(t!==null&&t.trim()!==v)location.reload();}).catch(function(){});},2000);})();"#;

/// Runs in `<head>`, before anything is painted: the class `hold` on `<html>` makes the decision
/// buttons ignore the pointer (and dims them) until 1.5 s after `DOMContentLoaded`, so on a slow,
/// heavy page no card is clickable while the cards above it are still being laid out. The same
/// again when the page comes back from the back-forward cache (held already when it left). Without
/// script nothing is held.
pub(crate) const HEAD_SCRIPT: &str = r#"(function(){var h=document.documentElement,t=0;
function hold(){h.classList.add('hold');}
function release(){clearTimeout(t);t=setTimeout(function(){h.classList.remove('hold');},1500);}
hold();document.addEventListener('DOMContentLoaded',release);
window.addEventListener('pagehide',hold);
window.addEventListener('pageshow',function(e){if(e.persisted){hold();release();}});})();"#;
