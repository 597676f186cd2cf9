// Progressive enhancement only: every page works without this file.
// A posted form is sent once: its buttons are disabled as it goes, so a double click does not
// post an action twice (the server also refuses a second post of one confirmation).
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!(form instanceof HTMLFormElement) || form.method.toLowerCase() !== "post") {
    return;
  }
  window.setTimeout(function () {
    form.querySelectorAll("button[type=submit]").forEach(function (button) {
      button.disabled = true;
    });
  }, 0);
});
