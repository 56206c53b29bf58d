/* nc-window-notify.c — error dialogs and toasts of the window: the leaf that
 * nc-window.c, nc-window-actions.c and nc-window-run.c all use, and that
 * uses none of them. */
#include "nc-window-private.h"

void nc_window_show_error(NcWindow *self, const char *heading, const char *body)
{
    GtkWidget *dialog = adw_message_dialog_new(GTK_WINDOW(self), heading, body);
    adw_message_dialog_add_response(ADW_MESSAGE_DIALOG(dialog), "close", "_Close");
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(dialog), "close");
    gtk_window_present(GTK_WINDOW(dialog));
}

/* The toast is going (timed out, closed or dismissed): the next message
 * needs a toast of its own. */
static void on_toast_dismissed(AdwToast *toast, NcWindow *self)
{
    if (self->toast == toast)
        g_clear_weak_pointer(&self->toast);
}

/* A newer result replaces the text of the toast on screen.  Not by
 * dismissing it and adding another: libadwaita 1.2 (Debian 12) can free a
 * toast twice when one is dismissed and the next added at once (its hide
 * animation's "done" handler), which crashed the workbench. */
void nc_window_toast(NcWindow *self, const char *text)
{
    if (self->toast) {
        adw_toast_set_title(self->toast, text);
        return;
    }
    AdwToast *toast = adw_toast_new(text);
    adw_toast_set_timeout(toast, 6);
    g_signal_connect_object(toast, "dismissed", G_CALLBACK(on_toast_dismissed), self, 0);
    g_set_weak_pointer(&self->toast, toast);
    adw_toast_overlay_add_toast(self->toast_overlay, toast);
}

void nc_window_dismiss_toast(NcWindow *self)
{
    if (self->toast)
        adw_toast_dismiss(self->toast); /* "dismissed" clears self->toast */
}

