// Progressive enhancement only: every page works without this file.
// A form with data-confirm asks before it is sent (void, refund).
document.addEventListener("submit", function (event) {
  var form = event.target;
  var question = form instanceof HTMLFormElement ? form.getAttribute("data-confirm") : null;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
