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
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {  // from anywhere, a field included: save (and next, in a queue)
      var submit = document.getElementById("save-next") || document.getElementById("save");
      if (submit) { e.preventDefault(); submit.click(); }
      return;
    }
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
// The conversation before the step and the form are panes of their own that end inside the first screen (CSS
// guesses the header's height; this measures it); the conversation shows its end, the messages just before the
// action. A one-column (narrow) layout leaves the panes as they are.
(function () {
  var context = document.getElementById("context");
  var panes = [context, document.getElementById("correction")];
  function fit() {
    panes.forEach(function (pane) {
      if (!pane || getComputedStyle(pane).position !== "sticky") return;
      var top = pane.getBoundingClientRect().top + window.scrollY;
      pane.style.maxHeight = Math.max(256, window.innerHeight - top - 8) + "px";
    });
  }
  fit();
  window.addEventListener("resize", fit);
  if (context) context.scrollTop = context.scrollHeight;
})();
