package keyfunc_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

// A key from the path parameter, with a constant in front. The id is read
// as the handler binds it, an int64, so every spelling of order 13 gets one
// key; text that is not an integer is refused.
func ExampleJoin() {
	key := keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("id", lockkey.Int(64)))

	r := gin.New()
	r.POST("/orders/:id", func(c *gin.Context) {
		k, err := key(c)
		fmt.Println(k, err)
	})
	for _, path := range []string{"/orders/13", "/orders/013", "/orders/+13", "/orders/%2013", "/orders/13%0A", "/orders/1:pay"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", path, nil))
	}
	// Output:
	// order:13 <nil>
	// order:13 <nil>
	// order:13 <nil>
	// order:13 <nil>
	// order:13 <nil>
	//  lockkey: invalid key part "path param id" (want an int64)
}

// Strict refuses every spelling but the canonical one, instead of reading
// them all as one value.
func ExampleParam_strict() {
	key := keyfunc.Param("id", lockkey.Int(64).Strict())

	r := gin.New()
	r.POST("/orders/:id", func(c *gin.Context) {
		k, err := key(c)
		fmt.Println(k, err)
	})
	for _, path := range []string{"/orders/13", "/orders/013"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", path, nil))
	}
	// Output:
	// 13 <nil>
	//  lockkey: invalid key part "path param id" (want an int64 in canonical form)
}

// The key from the bound, validated request: the handler reads the very
// value the key was built from.
func ExampleBind() {
	type orderURI struct {
		ID int64 `uri:"id" binding:"required,gt=0"`
	}
	key := keyfunc.Bind((*gin.Context).ShouldBindUri, func(u *orderURI) []string {
		return []string{"order", strconv.FormatInt(u.ID, 10)}
	})

	r := gin.New()
	r.POST("/orders/:id/pay", func(c *gin.Context) {
		k, err := key(c)
		if err != nil {
			fmt.Println(errors.Is(err, lockkey.ErrInvalidPart))
			return
		}
		fmt.Println(k, "paying order", keyfunc.Bound[orderURI](c).ID)
	})
	for _, path := range []string{"/orders/13/pay", "/orders/013/pay", "/orders/%2013/pay", "/orders/0/pay"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", path, nil))
	}
	// Output:
	// order:13 paying order 13
	// order:13 paying order 13
	// order:13 paying order 13
	// true
}

// The key as a template, with kinds, plus a header.
func ExampleMustTemplate() {
	key := keyfunc.MustTemplate("order:{param.id|int64}:{header.X-Tenant}")

	r := gin.New()
	r.POST("/orders/:id", func(c *gin.Context) {
		k, err := key(c)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(k)
	})
	req := httptest.NewRequest("POST", "/orders/042", nil)
	req.Header.Set("X-Tenant", "acme")
	r.ServeHTTP(httptest.NewRecorder(), req)
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/orders/42", nil))
	// Output:
	// order:42:acme
	// lockkey: missing key part "header X-Tenant"
}

// A field of a JSON body read as the handler binds it: an integer exactly,
// never through float64, and the handler can still bind the body.
func ExampleJSON() {
	key := keyfunc.JSON("order.id", lockkey.Uint(64))

	r := gin.New()
	r.POST("/pay", func(c *gin.Context) {
		k, err := key(c)
		if err != nil {
			fmt.Println(err)
			return
		}
		var body struct {
			Order struct {
				ID uint64 `json:"id"`
			} `json:"order"`
		}
		bindErr := c.ShouldBindBodyWithJSON(&body)
		fmt.Println(k, body.Order.ID, bindErr)
	})
	body := `{"order":{"id":12345678901234567891}}`
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/pay", strings.NewReader(body)))

	big := `{"order":{"id":"` + strings.Repeat("x", 2<<20) + `"}}`
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/pay", strings.NewReader(big)))
	// Output:
	// 12345678901234567891 12345678901234567891 <nil>
	// lockkey: request body too large (limit 1048576 bytes)
}

// A validator v10 tag, checked by the validator gin's binding uses.
func ExampleTag() {
	key := keyfunc.Query("session", keyfunc.Tag("required,uuid4"))

	r := gin.New()
	r.GET("/", func(c *gin.Context) {
		k, err := key(c)
		fmt.Println(k, err)
	})
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/?session=0b8e8a5c-54a4-4e0a-9f43-3b0e2a8c1d2f", nil))
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/?session=13", nil))
	// Output:
	// 0b8e8a5c-54a4-4e0a-9f43-3b0e2a8c1d2f <nil>
	//  lockkey: invalid key part "query session" (want text passing "required,uuid4")
}

// Mapping key errors to HTTP statuses, as the middlewares do.
func ExampleFunc_errors() {
	status := func(err error) int {
		switch {
		case err == nil:
			return http.StatusOK
		case errors.Is(err, lockkey.ErrBodyTooLarge):
			return http.StatusRequestEntityTooLarge
		case errors.Is(err, lockkey.ErrMissingPart), errors.Is(err, lockkey.ErrAmbiguousPart),
			errors.Is(err, lockkey.ErrInvalidPart), errors.Is(err, lockkey.ErrMalformedBody):
			return http.StatusBadRequest
		}
		return http.StatusInternalServerError
	}
	key := keyfunc.JSON("id", lockkey.Int(64))
	r := gin.New()
	r.POST("/", func(c *gin.Context) {
		_, err := key(c)
		fmt.Println(status(err), err)
	})
	for _, body := range []string{`{"id":13}`, `{"id":"13"}`, `{}`} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.ServeHTTP(httptest.NewRecorder(), req)
	}
	// Output:
	// 200 <nil>
	// 400 lockkey: invalid key part "json field id" (want an int64)
	// 400 lockkey: missing key part "json field id"
}
