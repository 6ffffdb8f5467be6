// Keys of the annotation step page. Everything here is also reachable by links and buttons;
// this only adds the keyboard. Keys are ignored while typing in a field (Esc leaves the field).
(function () {
  function typing(t) { return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)); }
  function follow(id) { var a = document.getElementById(id); if (a) { window.location.href = a.href; return true; } return false; }
  function setVerdict(value) {
    var select = document.getElementById("verdict");
    if (!select) return;
    select.value = value;
    select.dispatchEvent(new Event("change", { bubbles: true }));
  }
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && typing(e.target)) { e.target.blur(); return; }
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    var help = document.getElementById("shortcuts");
    var handled = true;
    switch (e.key) {
      case "j": handled = follow("next-step"); break;
      case "k": handled = follow("prev-step"); break;
      case "e": var first = document.querySelector("[data-first-field]"); if (first) first.focus(); else handled = false; break;
      case "1": setVerdict("optimal"); break;
      case "2": setVerdict("suboptimal"); break;
      case "3": setVerdict("harmful"); break;
      case "s": var save = document.getElementById("save"); if (save) save.click(); else handled = false; break;
      case "n": handled = follow("queue-next"); break;
      case "u": var undo = document.getElementById("undo-form"); if (undo) undo.requestSubmit(); else handled = false; break;
      case "?": if (help) help.hidden = !help.hidden; break;
      default: handled = false;
    }
    if (handled) e.preventDefault();
  });
})();
